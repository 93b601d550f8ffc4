"""Issue 11 (bounds): client-supplied times never trap, client-created state is bounded and expires, key rotation is
bounded across restarts, bulk deletes leave the event loop, connections are capped per peer. Loopback only, bounded."""
import base64
import concurrent.futures
import http.server
import json
import os
import re
import resource
import socket
import sqlite3
import subprocess
import threading
import time

import requests

from conftest import BINARY, FICTIONAL, ROOT, Emulator

CLI = os.environ.get("PHONE_AUTH_CLI_BIN", os.path.join(ROOT, ".build", "release", "phone-auth"))
OWNER = {"Authorization": "Bearer owner"}
ADMIN = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"
TEN_YEARS = 10 * 365 * 86400


def alive(emu):
    return emu.proc.poll() is None and requests.get(emu.url + "/", timeout=10).status_code == 200


def lookup(emu, uid):
    r = requests.post(emu.url + ADMIN + "/accounts:lookup", json={"localId": [uid]}, headers=OWNER)
    return r.json().get("users", [None])[0]


# -- client times -------------------------------------------------------------------------------------------------

def test_repeated_clock_advances_end_in_a_clear_error_never_a_crash(fresh):
    emu = fresh()
    statuses = []
    for _ in range(200):
        r = requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": TEN_YEARS})
        statuses.append(r.status_code)
        if r.status_code != 200:
            assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
            assert "clock:reset" in r.json()["error"]["message"]
    assert statuses.count(200) == 10 and statuses.count(400) == 190
    assert alive(emu)
    assert requests.get(emu.url + "/emulator/v1/clock").json()["offsetSeconds"] == 10 * TEN_YEARS
    assert emu.sign_in()["phoneNumber"] == FICTIONAL
    assert requests.post(emu.url + "/emulator/v1/clock:reset", json={}).status_code == 200
    assert requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 60}).status_code == 200


def test_huge_created_at_is_refused_and_the_data_dir_restarts(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    try:
        for body in ({"createdAt": "9223372036854775807"}, {"createdAt": 9223372036854775807}, {"lastLoginAt": "-1"},
                     {"validSince": "9223372036854775807"}, {"createdAt": "253402300800000"}):
            r = requests.post(a.url + ADMIN + "/accounts", json=body, headers=OWNER)
            assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT", (body, r.text)
        uid = a.sign_in()["localId"]
        r = requests.post(a.url + ADMIN + "/accounts:update", json={"localId": uid, "validSince": "9223372036854775807"}, headers=OWNER)
        assert r.status_code == 400
        r = requests.post(a.url + ADMIN + "/accounts", headers=OWNER,
                          json={"localId": "edge", "createdAt": "253402300799999", "lastLoginAt": "0", "validSince": "253402300799"})
        assert r.status_code == 200, r.text
        r = requests.post(a.url + ADMIN + "/accounts:batchCreate", headers=OWNER,
                          json={"users": [{"localId": "imp1", "createdAt": "9223372036854775807"}, {"localId": "imp2", "createdAt": "1700000000000"}]})
        assert [e["index"] for e in r.json()["error"]] == [0]
    finally:
        assert a.stop() == 0
    for _ in range(2):  # every start, not just the first
        b = Emulator(["--data-dir", data])
        try:
            assert alive(b)
            edge = lookup(b, "edge")
            assert (edge["createdAt"], edge["lastLoginAt"], edge["validSince"]) == ("253402300799999", "0", "253402300799")
            assert lookup(b, "imp2")["createdAt"] == "1700000000000" and lookup(b, "imp1") is None
        finally:
            assert b.stop() == 0


def test_a_row_an_older_version_wrote_with_a_huge_time_does_not_brick_start_up(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    assert a.stop() == 0
    # What the old server stored for {"createdAt":"9223372036854775807"}: a double past Int64.
    db = sqlite3.connect(os.path.join(data, "emulator.sqlite3"))
    db.execute("INSERT INTO users (project, tenant, local_id, doc) VALUES ('demo-phone', '', 'old', ?)",
               ('{"localId":"old","emailVerified":false,"disabled":false,"createdAt":9.2233720368547758e+18,"validSince":1e300}',))
    db.commit()
    db.close()
    b = Emulator(["--data-dir", data])
    try:
        assert alive(b)
        old = lookup(b, "old")
        assert old["createdAt"] == "9223372036854775807"
        # And an admin can repair it.
        r = requests.post(b.url + ADMIN + "/accounts:update", json={"localId": "old", "createdAt": "1700000000000", "validSince": "0"}, headers=OWNER)
        assert r.status_code == 200 and lookup(b, "old")["createdAt"] == "1700000000000"
    finally:
        assert b.stop() == 0


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def raw_token(payload_text):
    return b64({"alg": "none", "typ": "JWT"}) + "." + base64.urlsafe_b64encode(payload_text.encode()).rstrip(b"=").decode() + "."


def cli(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k != "FIREBASE_AUTH_EMULATOR_HOST"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=30, **kw)


def test_cli_token_decode_and_verify_with_huge_times_exit_without_a_signal(fresh):
    emu = fresh()
    for exp in ("9223372036854775807", "-9223372036854775808", "1e300", "9007199254740993", "-1"):
        token = raw_token('{"iss":"x","aud":"demo-phone","sub":"u","iat":%s,"exp":%s,"auth_time":%s}' % (exp, exp, exp))
        for args in (("token", "decode", token), ("token", "decode", token, "--json"), ("token", "verify", token, "--emulator", emu.url)):
            r = cli(*args)
            assert r.returncode in (0, 1), (exp, args[1], r.returncode, r.stderr)
    r = cli("token", "decode", raw_token('{"exp":9000000000000000000}'))
    assert r.returncode == 0 and "out of range" in r.stdout, r.stdout
    # The server refuses such a token (INVALID_ID_TOKEN), it does not trap either.
    r = emu.itk("lookup", {"idToken": raw_token('{"iss":"https://securetoken.google.com/demo-phone","aud":"demo-phone","sub":"u","iat":1,"exp":9.3e18}')})
    assert r.status_code == 400 and alive(emu)


class FakeServer(http.server.BaseHTTPRequestHandler):
    """Answers every admin call with a user whose times are far outside what our server would store."""
    user = {"localId": "u", "phoneNumber": "+15551230000", "createdAt": "9223372036854775807", "lastLoginAt": "-9223372036854775808",
            "validSince": "9223372036854775807"}

    def do_GET(self):
        self.reply({"users": [self.user]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.reply({"users": [self.user]})

    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_cli_users_get_and_list_with_huge_times_exit_cleanly():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        for args in (("users", "get", "u"), ("users", "list")):
            r = cli(*args, "--emulator", url)
            assert r.returncode == 0, (args, r.returncode, r.stderr)
            assert "out of range" in r.stdout, r.stdout
    finally:
        srv.shutdown()


# -- bounded, expiring state ---------------------------------------------------------------------------------------

def enforce(emu):
    r = requests.patch(emu.url + "/emulator/v1/projects/demo-phone/config", json={"phoneAuth": {"appVerification": "ENFORCE"}})
    assert r.status_code == 200, r.text


def mint(emu):
    return requests.post(emu.url + "/emulator/v1/projects/demo-phone/appCredentials", json={"type": "RECAPTCHA"}).json()["token"]


def test_minted_credentials_are_capped_and_expire(fresh):
    emu = fresh()
    enforce(emu)
    s = requests.Session()
    tokens = [s.post(emu.url + "/emulator/v1/projects/demo-phone/appCredentials", json={"type": "RECAPTCHA"}).json()["token"] for _ in range(300)]
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15551230001", "recaptchaToken": tokens[0]})
    assert r.json()["error"]["message"].startswith("CAPTCHA_CHECK_FAILED"), "the oldest was evicted (256 kept)"
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15551230001", "recaptchaToken": tokens[-1]})
    assert r.status_code == 200, r.text
    requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 121})
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15551230001", "recaptchaToken": tokens[-2]})
    assert r.json()["error"]["message"].startswith("CAPTCHA_CHECK_FAILED"), "expired after two minutes"
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15551230001", "recaptchaToken": mint(emu)})
    assert r.status_code == 200


def test_verify_client_app_tokens_pushes_and_receipts_are_bounded(fresh):
    emu = fresh()
    v3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyClient"
    for token in ("a" * 201, "f" * 100_000, "abc\ndef"):
        r = emu.post(v3, {"appToken": token, "isSandbox": True})
        assert r.status_code == 400 and r.json()["error"]["message"] == "INVALID_APP_CREDENTIAL", r.text
    receipts = [emu.post(v3, {"appToken": "%064x" % i}).json()["receipt"] for i in range(60)]
    pushes = requests.get(emu.url + "/emulator/v1/projects/demo-phone/pushNotifications").json()["pushNotifications"]
    assert len(pushes) == 50 and pushes[-1]["receipt"] == receipts[-1] and pushes[0]["receipt"] == receipts[10]
    enforce(emu)
    last = pushes[-1]
    requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 121})
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15551230002", "iosReceipt": last["receipt"], "iosSecret": last["secret"]})
    assert r.json()["error"]["message"] == "INVALID_APP_CREDENTIAL", "the receipt expired"
    assert requests.get(emu.url + "/emulator/v1/projects/demo-phone/pushNotifications").json()["pushNotifications"] == []
    # A tenant per request cannot multiply the old 1,000 × 1 MiB either: tokens are ≤ 200 bytes and 50 are kept.
    for i in range(200):
        emu.post(v3, {"appToken": "e" * 200, "tenantId": "t%d" % (i % 5)})
    assert alive(emu)


# -- key rotation --------------------------------------------------------------------------------------------------

X509 = "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"


def test_key_rotation_is_bounded_and_pruned_across_a_restart(tmp_path):
    import jwt
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    try:
        first = a.sign_in()["idToken"]
        first_kid = jwt.get_unverified_header(first)["kid"]
        retired = []
        for _ in range(7):
            r = requests.post(a.url + "/emulator/v1/keys:rotate", json={})
            assert r.status_code == 200
            assert len(r.json()["publishedKids"]) <= 5
            retired += r.json()["retiredKids"]
        published = r.json()["publishedKids"]
        assert len(published) == 5 and len(retired) == 3 and first_kid in retired
        assert set(requests.get(a.url + X509).json()) == set(published)
        r = a.itk("lookup", {"idToken": first})
        assert r.json()["error"]["message"] == "INVALID_ID_TOKEN", "a retired key's token is refused"
        current = a.sign_in()["idToken"]
    finally:
        assert a.stop() == 0
    db = sqlite3.connect(os.path.join(data, "emulator.sqlite3"))
    stored = [row[0] for row in db.execute("SELECT kid FROM signing_keys")]
    db.close()
    assert sorted(stored) == sorted(published), "retired keys left the data directory"
    b = Emulator(["--data-dir", data])
    try:
        keys = requests.get(b.url + X509).json()
        assert set(keys) == set(published), "a restart publishes exactly the kept keys"
        jwks = requests.get(b.url + "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com").json()["keys"]
        assert [k["kid"] for k in jwks][0] == published[0], "the newest key is still current"
        assert b.itk("lookup", {"idToken": first}).json()["error"]["message"] == "INVALID_ID_TOKEN"
        assert b.itk("lookup", {"idToken": current}).status_code == 200
        assert jwt.get_unverified_header(b.sign_in()["idToken"])["kid"] == published[0]
    finally:
        assert b.stop() == 0


# -- bulk deletes ----------------------------------------------------------------------------------------------------

def test_batch_delete_of_50_users_does_not_block_the_server(fresh):
    # One event loop and unsigned tokens: before, batchDelete ran on that loop whatever else was waiting.
    emu = fresh("--token-signing", "none", env={"PHONE_AUTH_EMULATOR_EVENT_LOOPS": "1"})
    s = requests.Session()
    uids = []
    for i in range(50):
        body = s.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:signUp", params={"key": "k"}, json={}).json()
        uids.append(body["localId"])
        for _ in range(20):  # refresh tokens to delete with each user
            s.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:update", params={"key": "k"},
                   json={"idToken": body["idToken"], "returnSecureToken": True})
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        deleting = ex.submit(requests.post, emu.url + ADMIN + "/accounts:batchDelete", json={"localIds": uids, "force": True},
                             headers=OWNER, timeout=60)
        statuses = [requests.get(emu.url + "/", timeout=20).status_code for _ in range(20)]
        r = deleting.result()
    assert r.status_code == 200 and r.json() == {}, r.text
    assert statuses == [200] * 20
    r = requests.get(emu.url + ADMIN + "/accounts:batchGet", params={"maxResults": 1000}, headers=OWNER)
    assert r.json().get("users", []) == []


# -- descriptors and per-peer connections ---------------------------------------------------------------------------

def connect(port, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def get_root(s):
    """True: answered 200. False: refused (503, closed or reset)."""
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = s.recv(12)
    except (ConnectionResetError, BrokenPipeError):
        return False
    if head.startswith(b"HTTP/1.1 200"):
        # Drain the rest of the response so the connection stays usable.
        s.settimeout(0.5)
        try:
            while s.recv(65536):
                pass
        except socket.timeout:
            pass
        s.settimeout(10)
        return True
    assert head == b"" or head.startswith(b"HTTP/1.1 503"), head
    return False


def test_a_per_peer_cap_refuses_the_extra_connections_of_one_address(fresh):
    emu = fresh("--max-connections-per-peer", "20")
    held = [connect(emu.port) for _ in range(20)]
    try:
        assert all(get_root(s) for s in held)
        extra = connect(emu.port)
        assert get_root(extra) is False, "the 21st connection from 127.0.0.1 is refused at once, not left hanging"
        extra.close()
        other = connect(emu.port, source="127.0.0.2")
        assert get_root(other) is True, "another address is unaffected"
        other.close()
        for s in held[:5]:
            s.close()
        held = held[5:]
        for _ in range(100):  # the server notices the closes on its next poll
            s = connect(emu.port)
            if get_root(s):
                s.close()
                break
            s.close()
            time.sleep(0.05)
        else:
            raise AssertionError("closed connections did not free their slots")
    finally:
        for s in held:
            s.close()
    log = emu.log()
    assert log.count("refusing connections") <= 2, "the warning is rate-limited"


class LimitedEmulator(Emulator):
    """An emulator started with a given RLIMIT_NOFILE (soft, hard)."""

    def __init__(self, soft, hard, args=()):
        real = subprocess.Popen

        def popen(*a, **kw):
            kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            return real(*a, **kw)

        subprocess.Popen = popen
        try:
            super().__init__(["--log-level", "debug", *args])
        finally:
            subprocess.Popen = real


def open_files_limits(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)


def test_the_soft_descriptor_limit_is_raised_and_a_full_server_answers_instead_of_hanging():
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 256)
    emu = LimitedEmulator(min(128, hard), hard)
    socks = []
    try:
        assert open_files_limits(emu.proc.pid) == (hard, hard)
        for _ in range(hard):  # more than the server may hold: the connection budget keeps a reserve
            socks.append(connect(emu.port))
        answered = [get_root(s) for s in socks]
        assert 0 < answered.count(True) < hard and answered.count(False) > 0
        for s in socks:
            s.close()
        socks = []
        for _ in range(100):
            if requests.get(emu.url + "/", timeout=10).status_code == 200:
                break
            time.sleep(0.05)
        assert alive(emu)
        assert emu.sign_in()["phoneNumber"] == FICTIONAL
    finally:
        for s in socks:
            s.close()
        emu.stop()
    log = emu.log()
    assert "descriptor limit" in log and "connection limits" in log
    assert "pausing the listener" not in log, "the total cap keeps accept from running out of descriptors"
    assert log.count("refusing connections") <= 2
