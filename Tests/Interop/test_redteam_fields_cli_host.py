"""Issue 11 follow-up (red-team F3, F5 and the info items), against the release binaries: bounded user fields and
user count, a CLI that prints hostile text escaped, Host values that must be real IPv6 literals or DNS names,
bounded export depth, and log lines that escape bidi controls and cut long client text."""
import json
import os
import socket
import subprocess

import requests

from conftest import ROOT, Emulator, error_message

CLI = os.environ.get("PHONE_AUTH_CLI_BIN", os.path.join(ROOT, ".build", "release", "phone-auth"))
ITK = "/identitytoolkit.googleapis.com/v1"
ADMIN = ITK + "/projects/demo-phone"
OWNER = {"Authorization": "Bearer owner"}
CROSS_SITE = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
# Raw terminal controls: C0 (but the CLI's own line feeds), DEL, C1, and the bidi controls.
UNSAFE = [chr(c) for c in range(0x20) if c != 0x0A] + [chr(0x7F)] + [chr(c) for c in range(0x80, 0xA0)] + \
    [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)] + ["\u200e", "\u200f", "\u061c"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def cli(emu, *args):
    env = {k: v for k, v in os.environ.items() if k != "FIREBASE_AUTH_EMULATOR_HOST"}
    return subprocess.run([CLI, *args, "--emulator", emu.url], capture_output=True, text=True, env=env, timeout=30)


def assert_terminal_safe(text):
    raw = sorted({f"U+{ord(c):04X}" for c in text if c in UNSAFE})
    assert not raw, f"raw controls reached the terminal: {raw}"


# -- F3 ----------------------------------------------------------------------------------------------------------

def test_f3_a_web_page_cannot_park_megabytes_in_user_records(fresh):
    """The red team's t_mem_signup.py, bounded: 1 MiB displayName per cross-origin anonymous signUp."""
    emu = fresh()
    body = '{"displayName":"' + "A" * ((1 << 20) - 40) + '"}'
    url = emu.url + ITK + "/accounts:signUp?key=x"
    requests.post(url, data='{"displayName":"warm-up"}', headers=CROSS_SITE)
    before = rss_kib(emu.proc.pid)
    for _ in range(48):
        r = requests.post(url, data=body, headers=CROSS_SITE)
        assert r.status_code == 400
        assert error_message(r).startswith("INVALID_DISPLAY_NAME : displayName must be at most 1024 characters")
    grown = rss_kib(emu.proc.pid) - before
    assert grown < 24 * 1024, f"RSS grew {grown} KiB for 48 refused signUps (48 MiB would be stored without the limit)"
    users = requests.get(emu.url + ADMIN + "/accounts:batchGet", params={"maxResults": 1000}, headers=OWNER).json()
    assert [u.get("displayName") for u in users["users"]] == ["warm-up"]
    # photoUrl, and the admin and import paths.
    r = requests.post(url, data=json.dumps({"photoUrl": "https://x.test/" + "p" * 4096}), headers=CROSS_SITE)
    assert r.status_code == 400 and error_message(r).startswith("INVALID_PHOTO_URL")
    r = requests.post(emu.url + ADMIN + "/accounts", json={"localId": "a", "displayName": "N" * 1025}, headers=OWNER)
    assert r.status_code == 400 and error_message(r).startswith("INVALID_DISPLAY_NAME")
    r = requests.post(emu.url + ADMIN + "/accounts:batchCreate", json={"users": [{"localId": "b", "photoUrl": "p" * 2049}]}, headers=OWNER)
    assert r.status_code == 200 and r.json()["error"][0]["message"].startswith("INVALID_PHOTO_URL")


def test_f3_users_per_project_are_capped(fresh):
    emu = fresh("--max-users", "5")
    for _ in range(5):
        assert requests.post(emu.url + ITK + "/accounts:signUp?key=x", data="{}", headers=CROSS_SITE).status_code == 200
    r = requests.post(emu.url + ITK + "/accounts:signUp?key=x", data="{}", headers=CROSS_SITE)
    assert r.status_code == 400
    assert error_message(r) == "QUOTA_EXCEEDED : Too many users: a project (or tenant) holds at most 5 users (--max-users)."
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
    # The environment variable, and a bad value stops the server with a clear message.
    emu2 = fresh(env={"PHONE_AUTH_EMULATOR_MAX_USERS": "1"})
    assert emu2.itk("signUp", {}).status_code == 200
    assert error_message(emu2.itk("signUp", {})).startswith("QUOTA_EXCEEDED")
    bad = subprocess.run([os.path.join(ROOT, ".build", "release", "phone-auth-emulator"), "--port", "0", "--max-users", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--max-users" in bad.stderr


# -- F5 ----------------------------------------------------------------------------------------------------------

HOSTILE_NAME = "\u001b]0;pwned\u0007\u001b[2J\u001b[31mFAKE\r\nuid: admin\u202egnp.exe\u009b31m\u007f"


def test_f5_the_cli_prints_server_text_escaped(fresh):
    emu = fresh()
    r = requests.post(emu.url + ADMIN + "/accounts", json={"localId": "esc1", "displayName": HOSTILE_NAME,
                                                          "customAttributes": json.dumps({"\u001b[2Jk": "\u202ev"})}, headers=OWNER)
    assert r.status_code == 200, r.text
    got = cli(emu, "users", "get", "esc1")
    assert got.returncode == 0, got.stderr
    assert_terminal_safe(got.stdout)
    assert "\nuid: admin" not in got.stdout
    assert "\\u{1B}]0;pwned\\u{7}" in got.stdout and "\\u{202E}" in got.stdout
    listed = cli(emu, "users", "list")
    assert_terminal_safe(listed.stdout)
    as_json = cli(emu, "users", "get", "esc1", "--json")
    assert_terminal_safe(as_json.stdout)
    assert json.loads(as_json.stdout)["displayName"] == HOSTILE_NAME, "--json is still the same JSON"
    # An error message from the server is escaped too.
    missing = cli(emu, "users", "delete", "nobody\u202e")
    assert missing.returncode == 1
    assert_terminal_safe(missing.stderr)


def test_f5_token_commands_escape_keys_and_refuse_out_of_range_times(fresh):
    emu = fresh()
    import base64

    def b64(o):
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    # The red team's evil.jwt: an OSC title, BEL and a screen clear in a header key; a colour, CR LF and a forged
    # "uid: admin" line in a claim key; exp 1e17.
    token = b64({"alg": "none", "\u001b]0;pwned\u0007\u001b[2J": 1}) + "." + \
        b64({"sub": "x", "\u001b[31mRED\r\nuid: admin": 2, "exp": 10 ** 17, "iat": 1, "aud": "demo-phone",
             "iss": "https://securetoken.google.com/demo-phone", "name": "\u202eevil\u009b"}) + "."
    decoded = cli(emu, "token", "decode", token)
    assert decoded.returncode == 0, decoded.stderr
    assert_terminal_safe(decoded.stdout)
    assert "\nuid: admin" not in decoded.stdout
    verified = cli(emu, "token", "verify", token)
    assert verified.returncode == 1
    assert_terminal_safe(verified.stdout)
    exp_row = next(line for line in verified.stdout.splitlines() if " exp " in line)
    assert exp_row.startswith("FAIL") and "out of range" in exp_row, verified.stdout


# -- Host, export depth, log lines ---------------------------------------------------------------------------------

def raw_status(emu, host):
    with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_host_must_be_a_real_ipv6_literal_or_dns_name(emu):
    for bad in ["[:]", "[:]:9099", "[::::]", "[1:2]", "[::1]x", "-", "a..b"]:
        assert raw_status(emu, bad) == 403, bad
    for good in ["[::1]", f"[::1]:{emu.port}", "localhost.", "127.0.0.1", "[::ffff:127.0.0.1]"]:
        assert raw_status(emu, good) == 200, good


def test_export_depth_is_bounded_and_refusals_log_a_cut_escaped_path(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    emu = Emulator(["--export-root", str(root)])
    try:
        url = emu.url + "/emulator/v1/projects/demo-phone:export"
        r = requests.post(url, data=json.dumps({"path": "d/" * 40}), headers={"Content-Type": "text/plain"})
        assert r.status_code == 400
        assert error_message(r) == "INVALID_ARGUMENT : path may be at most 32 directories deep and create at most 2 of them"
        r = requests.post(url, data=json.dumps({"path": "e\u202e/f/g/" + "h" * 5000}))
        assert r.status_code == 400
        assert os.listdir(root) == [], "a refused export creates no directory"
        assert requests.post(url, json={"path": "exports/run-1"}).status_code == 200
    finally:
        assert emu.stop() == 0
    refused = [line for line in emu.log().splitlines() if "export refused" in line]
    assert len(refused) == 2
    assert all(len(line) < 700 for line in refused), [len(line) for line in refused]
    assert "\u202e" not in emu.log() and "e\\u{202E}/f/g/" in refused[1]
