"""Process-level behaviour: flags, config errors, signing modes, HTTP limits, malformed input, shutdown."""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import requests

from conftest import BINARY, FICTIONAL, ROOT, Emulator


def run_bin(*args, env=None, cwd=ROOT):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PHONE_AUTH_EMULATOR_")}
    e.update(env or {})
    return subprocess.run([BINARY, *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=20)


def raw(port, data, read_timeout=5.0, shut=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    chunks = []
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
    except socket.timeout:
        pass
    s.close()
    return b"".join(chunks)


def test_help_and_version():
    r = run_bin("--help")
    assert r.returncode == 0 and "--test-phone" in r.stdout
    r = run_bin("--version")
    assert r.returncode == 0 and r.stdout.startswith("phone-auth-emulator ")


def test_invalid_config_exits_2_naming_the_key():
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"projects": {"demo-phone": {"phoneAuth": {"codeLenght": 6}}}}, f)
    r = run_bin("--config", f.name)
    assert r.returncode == 2
    assert "codeLenght" in r.stderr and f.name in r.stderr
    r = run_bin("--config", "/nonexistent.json")
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run_bin("--port", "99999")
    assert r.returncode == 2
    r = run_bin("--bogus-flag")
    assert r.returncode == 2 and "--bogus-flag" in r.stderr
    r = run_bin("--test-phone", "12345=1")
    assert r.returncode == 2


def test_embedded_default_config_when_no_file():
    with tempfile.TemporaryDirectory() as d:
        e = Emulator(cwd=d)
        try:
            assert e.sign_in()["phoneNumber"] == FICTIONAL
        finally:
            assert e.stop() == 0


def test_port_in_use_is_a_clear_error(emu):
    r = run_bin("--port", str(emu.port))
    assert r.returncode != 0 and "Address already in use" in r.stderr


def test_token_signing_none_matches_the_official_emulator(fresh):
    emu = fresh("--token-signing", "none")
    body = emu.sign_in()
    h, p, s = body["idToken"].split(".")
    assert json.loads(base64.urlsafe_b64decode(h + "==")) == {"alg": "none", "typ": "JWT"}
    assert s == ""
    assert emu.itk("lookup", {"idToken": body["idToken"]}).status_code == 200
    r = emu.session.post(emu.url + "/securetoken.googleapis.com/v1/token", params={"key": "k"},
                         data={"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.json()["access_token"].endswith(".")


def test_signing_key_file_gives_stable_kid(fresh, tmp_path):
    key = tmp_path / "key.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)], check=True, capture_output=True)
    a = fresh("--signing-key", str(key))
    kid_a = list(a.session.get(a.url + "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com").json())
    token = a.sign_in()["idToken"]
    a.stop()
    b = fresh(env={"PHONE_AUTH_EMULATOR_SIGNING_KEY": str(key)})
    kid_b = list(b.session.get(b.url + "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com").json())
    assert kid_a == kid_b
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["kid"] == kid_a[0]
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    r = run_bin("--signing-key", str(bad))
    assert r.returncode == 2 and "bad.pem" in r.stderr


def test_keep_alive_and_pipelining_in_order(emu):
    reqs = b""
    for i in range(3):
        reqs += b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    body = b'{"phoneNumber":"+16505554567"}'
    reqs += (b"POST /identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k HTTP/1.1\r\nHost: localhost\r\n"
             b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    reqs += b"GET /nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    out = raw(emu.port, reqs)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
    assert statuses == [b"200", b"200", b"200", b"200", b"404"]
    assert b"sessionInfo" in out


def test_http_limits(emu):
    out = raw(emu.port, b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431 ")
    out = raw(emu.port, b"POST /identitytoolkit.googleapis.com/v1/accounts:lookup?key=k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n{")
    assert out.startswith(b"HTTP/1.1 413 ")
    r = requests.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:lookup?key=k", data=b"{" + b" " * (1024 * 1024 + 10) + b"}")
    assert r.status_code == 413
    out = raw(emu.port, b"GARBAGE\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ")
    out = raw(emu.port, b"GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
    assert out.startswith(b"HTTP/1.1 400 ")
    out = raw(emu.port, b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ")
    out = raw(emu.port, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 411 ")
    out = raw(emu.port, b"GET / HTTP/2.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 505 ")
    out = raw(emu.port, b"GET / HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in out
    out = raw(emu.port, b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"\r\n\r\n")
    # Half-closed client still gets its answer.
    out = raw(emu.port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", shut=True)
    assert out.startswith(b"HTTP/1.1 200 ")
    assert requests.get(emu.url + "/").status_code == 200


def test_slow_client_is_cut_off(fresh):
    emu = fresh("--request-timeout", "1")
    s = socket.create_connection(("127.0.0.1", emu.port), timeout=10)
    s.sendall(b"POST /identitytoolkit.googleapis.com/v1/accounts:lookup?key=k HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
    start = time.time()
    data = b""
    while True:
        c = s.recv(4096)
        if not c:
            break
        data += c
    assert data.startswith(b"HTTP/1.1 408 ")
    assert time.time() - start < 5
    s.close()
    assert requests.get(emu.url + "/").status_code == 200


def test_random_garbage_never_kills_the_server(emu):
    import random
    rng = random.Random(1234)
    for i in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
        if i % 3 == 0:
            blob = b"POST /identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k HTTP/1.1\r\nContent-Length: " + str(len(blob)).encode() + b"\r\n\r\n" + blob
        try:
            raw(emu.port, blob, read_timeout=0.5, shut=True)
        except OSError:
            pass
    for body in ['{"sessionInfo": [1,2,3], "code": {}}', '{"phoneNumber": 1e400}', "[" * 5000, '{"a":' * 3000, '"\\ud800"', "nul\x00l"]:
        r = emu.session.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber", params={"key": "k"}, data=body.encode())
        assert r.status_code == 400, body
    assert requests.get(emu.url + "/").status_code == 200


def test_graceful_shutdown_exits_zero(fresh):
    emu = fresh()
    assert emu.sign_in()
    assert emu.stop(signal.SIGINT) == 0
    emu2 = fresh()
    assert emu2.stop(signal.SIGTERM) == 0


def test_starts_like_the_docker_image():
    """The image runs the static binary with PHONE_AUTH_EMULATOR_HOST=0.0.0.0 and checks health with the CLI."""
    env = {"PHONE_AUTH_EMULATOR_HOST": "0.0.0.0", "PHONE_AUTH_EMULATOR_PORT": "0", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([BINARY, "--config", os.path.join(ROOT, "config", "emulator.json")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://0.0.0.0:"), line
        port = int(line.rsplit(":", 1)[1])
        cli = os.path.join(os.path.dirname(BINARY), "phone-auth")
        r = subprocess.run([cli, "health", "--emulator", f"http://127.0.0.1:{port}"], env={}, capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert "beyond loopback" in proc.stderr.read()
