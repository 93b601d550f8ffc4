"""The plugin through pytester: real pytest runs in subprocesses, against the real binary."""
import urllib.request

import pytest

HELPERS = r'''
import base64, json, os, threading, urllib.request

def claims(token):
    p = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))

def post(emu, path, body):
    req = urllib.request.Request(emu.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())
'''


def test_one_emulator_per_session_with_the_helpers(pytester, monkeypatch):
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(test_it=r'''
import os, threading
from helpers import claims, post

def test_environment_points_at_it(phone_auth_emulator, tmp_path_factory):
    emu = phone_auth_emulator
    assert os.environ["FIREBASE_AUTH_EMULATOR_HOST"] == emu.host
    assert os.environ["PHONE_AUTH_EMULATOR_URL"] == emu.url
    assert os.environ["GCLOUD_PROJECT"] == emu.project == "demo-phone"
    assert emu.worker == "master"
    with open(os.path.join(os.environ["OUT"], "url-1"), "w") as f:
        f.write(emu.url)

def test_mint_token_and_reset(phone_auth):
    token = phone_auth.mint_token("alice", role="admin", email="alice@example.com", expires_in=60)
    c = claims(token)
    assert c["sub"] == "alice" and c["role"] == "admin" and c["email"] == "alice@example.com" and c["exp"] - c["iat"] == 60
    full = phone_auth.mint("bob", phone_number="+15551230001", sign_in_provider="phone")
    assert full["isNewUser"] is True and claims(full["idToken"])["phone_number"] == "+15551230001"
    assert phone_auth.snapshot("two")["users"] == 2
    assert phone_auth.reset() == {"projectId": "demo-phone", "users": 0, "tenants": []}
    assert phone_auth.restore("two")["users"] == 2

def test_phone_auth_starts_from_the_starting_state(phone_auth):
    assert phone_auth.reset()["users"] == 0  # alice and bob of the test before are gone

def test_wait_for_code(phone_auth):
    phone = "+15551239999"
    threading.Timer(0.3, lambda: post(phone_auth, "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                      {"phoneNumber": phone})).start()
    code = phone_auth.wait_for_code(phone, timeout=20)
    assert len(code) == 6 and code.isdigit()

def test_events(phone_auth):
    phone_auth.mint_token("carol")
    events = phone_auth.events(types=["user.*", "project.reset"])
    assert events[-1]["type"] == "user.created" and events[-1]["uid"] == "carol"
    assert "project.reset" in [e["type"] for e in events]
    assert all(e["type"] == "tokens.issued" for e in phone_auth.events(types="tokens.issued"))

def test_refused_calls_raise(phone_auth):
    from phone_auth_emulator import EmulatorError
    try:
        phone_auth.mint_token("x", sub="nope")
    except EmulatorError as e:
        assert e.status == 400 and e.message == "FORBIDDEN_CLAIM : sub"
    else:
        raise AssertionError("no error")

def test_the_same_emulator(phone_auth_emulator):
    with open(os.path.join(os.environ["OUT"], "url-2"), "w") as f:
        f.write(phone_auth_emulator.url)
''')
    out = pytester.mkdir("out")
    monkeypatch.setenv("OUT", str(out))  # the run's subprocess inherits the environment
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=7)
    first, second = (out / "url-1").read_text(), (out / "url-2").read_text()
    assert first == second, "one emulator for the session"
    with pytest.raises(OSError):  # stopped when the session ended
        urllib.request.urlopen(first + "/", timeout=5)


def test_one_emulator_per_xdist_worker(pytester, monkeypatch):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_workers=r'''
import os, pytest

@pytest.mark.parametrize("n", range(8))
def test_worker(phone_auth_emulator, n):
    assert phone_auth_emulator.worker == os.environ["PYTEST_XDIST_WORKER"]
    with open(os.path.join(os.environ["OUT"], f"{n}"), "w") as f:
        f.write(phone_auth_emulator.worker + " " + phone_auth_emulator.url)
    phone_auth_emulator.mint_token(f"user-{n}")
''')
    out = pytester.mkdir("out")
    monkeypatch.setenv("OUT", str(out))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=8)
    seen = {}
    for f in out.iterdir():
        worker, url = f.read_text().split()
        seen.setdefault(worker, set()).add(url)
    assert sorted(seen) == ["gw0", "gw1"], seen
    assert all(len(urls) == 1 for urls in seen.values()), "one emulator per worker"
    assert len({u for urls in seen.values() for u in urls}) == 2, "each on its own port"


def test_server_flags_from_the_ini_file(pytester):
    pytester.makeini("[pytest]\nphone_auth_emulator_args = --test-phone +15555550100=654321 --project demo-flags --admin-token=s3cret-token\n")
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(test_flags=r'''
from helpers import post

def test_the_fictional_number_signs_in(phone_auth):  # `phone_auth` reset through --admin-token
    assert phone_auth.project == "demo-flags" and phone_auth.admin_token == "s3cret-token"
    assert phone_auth.mint_token("guarded")
    session = post(phone_auth, "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", {"phoneNumber": "+15555550100"})
    body = post(phone_auth, "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k",
                {"sessionInfo": session["sessionInfo"], "code": "654321"})
    assert body["phoneNumber"] == "+15555550100"
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=1)


def test_a_missing_binary_is_a_clear_error(pytester):
    pytester.makepyfile(test_missing="def test_needs_it(phone_auth_emulator):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--phone-auth-emulator-bin", "/nonexistent/phone-auth-emulator")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*phone-auth-emulator not found or not executable: /nonexistent/phone-auth-emulator*"])


def test_a_server_that_cannot_start_says_why(pytester):
    pytester.makepyfile(test_bad="def test_needs_it(phone_auth_emulator):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--phone-auth-emulator-arg=--no-such-flag")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*did not start (exit status 2)*no-such-flag*"])
