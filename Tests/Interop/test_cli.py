"""Issue 6: the `phone-auth` CLI driven as a subprocess against the running emulator, every subcommand."""
import json
import os
import pty
import subprocess
import time

from conftest import FICTIONAL, ROOT

CLI = os.environ.get("PHONE_AUTH_CLI_BIN", os.path.join(ROOT, ".build", "release", "phone-auth"))


def run(emu, *args, input=None, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "FIREBASE_AUTH_EMULATOR_HOST"}
    env.update(env_extra or {})
    base = ["--emulator", emu.url] if emu else []
    return subprocess.run([CLI, *args, *base], capture_output=True, text=True, input=input, env=env, timeout=30)


def test_three_commands_from_nothing_to_a_verified_token(emu):
    r = run(emu, "health")
    assert r.returncode == 0 and "ready:" in r.stdout
    r = run(emu, "sign-in", FICTIONAL, "--code", "123456", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert set(body) >= {"idToken", "refreshToken", "localId", "phoneNumber", "isNewUser", "expiresIn"}
    r = run(emu, "token", "verify", body["idToken"])
    assert r.returncode == 0 and r.stdout.strip().endswith("valid"), r.stdout
    r = run(emu, "token", "verify", body["idToken"], "--json")
    v = json.loads(r.stdout)
    assert v["valid"] is True and v["checks"]["signature"]["ok"] is True


def test_sign_in_human_output_and_global_options_first(emu):
    r = run(None, "--emulator", emu.url, "--project", "demo-phone", "sign-in", FICTIONAL, "--code", "123456")
    assert r.returncode == 0, r.stderr
    lines = dict(l.split(":", 1) for l in r.stdout.splitlines())
    assert lines["phone"].strip() == FICTIONAL and lines["ID token"].strip().count(".") == 2


def test_sign_in_takes_a_real_looking_numbers_code_from_the_inbox(emu):
    r = run(emu, "sign-in", "+15551239000", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phoneNumber"] == "+15551239000"


def test_wrong_code_exits_1_with_the_google_code(emu):
    r = run(emu, "sign-in", FICTIONAL, "--code", "000000")
    assert r.returncode == 1 and "INVALID_CODE" in r.stderr
    r = run(emu, "sign-in", FICTIONAL, "--code", "000000", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "INVALID_CODE"


def test_interactive_prompt_through_a_pty(emu):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLI, [CLI, "sign-in", FICTIONAL, "--emulator", emu.url, "--json"])
    out = b""
    deadline = time.time() + 15
    sent = False
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if not sent and b"Enter the code" in out:
            os.write(fd, b"123456\n")
            sent = True
    _, status = os.waitpid(pid, 0)
    assert sent, out
    assert os.WEXITSTATUS(status) == 0, out
    assert b'"idToken"' in out


def test_send_verify_codes_wait(emu):
    r = run(emu, "send", "+15551239001", "--json")
    session = json.loads(r.stdout)["sessionInfo"]
    r = run(emu, "codes", "--phone", "+15551239001", "--json")
    entry = json.loads(r.stdout)["verificationCodes"][0]
    assert entry["sessionInfo"] == session
    r = run(emu, "codes")
    assert r.returncode == 0 and "+15551239001" in r.stdout and "ATTEMPTS LEFT" in r.stdout
    # A sessionInfo can begin with "-" (one in 64: a value, not an option) or "--" (one in 4,096: after "--").
    r = run(None, "--emulator", emu.url, "verify", "--json", "--", session, entry["code"])
    assert r.returncode == 0 and json.loads(r.stdout)["phoneNumber"] == "+15551239001", r.stderr
    # --wait blocks until a code arrives from elsewhere.
    waiter = subprocess.Popen([CLI, "codes", "--phone", "+15551239002", "--wait", "10", "--json", "--emulator", emu.url],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert waiter.poll() is None
    emu.send("+15551239002")
    out, _ = waiter.communicate(timeout=10)
    assert waiter.returncode == 0 and json.loads(out)["phoneNumber"] == "+15551239002"
    r = run(emu, "codes", "--phone", "+15551239003", "--wait", "0.3")
    assert r.returncode == 1 and "NOT_FOUND" in r.stderr


def test_users_claims_and_reset(fresh):
    emu = fresh()
    uid = json.loads(run(emu, "sign-in", FICTIONAL, "--code", "123456", "--json").stdout)["localId"]
    r = run(emu, "users", "list", "--json")
    assert [u["localId"] for u in json.loads(r.stdout)["users"]] == [uid]
    r = run(emu, "users", "list")
    assert uid in r.stdout and "PHONE" in r.stdout
    assert json.loads(run(emu, "users", "get", FICTIONAL, "--json").stdout)["localId"] == uid
    r = run(emu, "users", "get", uid)
    assert "phone:" in r.stdout and FICTIONAL in r.stdout
    r = run(emu, "claims", "set", uid, '{"role":"admin"}')
    assert r.returncode == 0
    token = json.loads(run(emu, "sign-in", FICTIONAL, "--code", "123456", "--json").stdout)["idToken"]
    claims = json.loads(run(emu, "token", "decode", token, "--json").stdout)["claims"]
    assert claims["role"] == "admin"
    assert run(emu, "claims", "set", uid, "[1]").returncode == 64
    assert run(emu, "claims", "set", uid, '{"sub":"x"}').returncode == 1
    r = run(emu, "users", "delete", uid)
    assert r.returncode == 0
    assert run(emu, "users", "get", uid).returncode == 1
    run(emu, "sign-in", FICTIONAL, "--code", "123456")
    emu.send("+15551239004")
    r = run(emu, "reset", "--json")
    assert r.returncode == 0
    assert json.loads(run(emu, "users", "list", "--json").stdout)["users"] == []
    assert json.loads(run(emu, "codes", "--json").stdout)["verificationCodes"] == []


def test_config_and_test_numbers(fresh):
    emu = fresh()
    r = run(emu, "config", "get", "--json")
    assert json.loads(r.stdout)["phoneAuth"]["codeLength"] == 6
    r = run(emu, "config", "set", '{"phoneAuth":{"maxCodeAttempts":2}}', "--json")
    assert json.loads(r.stdout)["phoneAuth"]["maxCodeAttempts"] == 2
    assert run(emu, "config", "set", '{"phoneAuth":{"nope":1}}').returncode == 1
    assert run(emu, "config", "set", "not json").returncode == 64
    r = run(emu, "test-numbers", "add", "+15555550100", "654321", "--json")
    assert json.loads(r.stdout)["testPhoneNumbers"] == {FICTIONAL: "123456", "+15555550100": "654321"}
    assert json.loads(run(emu, "sign-in", "+15555550100", "--code", "654321", "--json").stdout)["phoneNumber"] == "+15555550100"
    r = run(emu, "test-numbers", "list")
    assert "+15555550100" in r.stdout and "654321" in r.stdout
    r = run(emu, "test-numbers", "remove", "+15555550100", "--json")
    assert json.loads(r.stdout)["testPhoneNumbers"] == {FICTIONAL: "123456"}
    assert run(emu, "test-numbers", "remove", "+15555550100").returncode == 1


def test_token_verify_failures(fresh):
    emu = fresh()
    token = json.loads(run(emu, "sign-in", FICTIONAL, "--code", "123456", "--json").stdout)["idToken"]
    h, p, s = token.split(".")
    r = run(emu, "token", "verify", h + "." + p + "." + s[:-4] + "AAAA")
    assert r.returncode == 1 and "FAIL signature" in r.stdout
    r = run(emu, "token", "verify", token, "--project", "other-project")
    assert r.returncode == 1 and "FAIL aud" in r.stdout
    import requests
    requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 3601})
    r = run(emu, "token", "verify", token)
    assert r.returncode == 1 and "FAIL exp" in r.stdout


def test_env_default_and_usage_errors(emu):
    r = run(None, "health", env_extra={"FIREBASE_AUTH_EMULATOR_HOST": emu.host_port})
    assert r.returncode == 0
    assert run(None, "health", env_extra={"FIREBASE_AUTH_EMULATOR_HOST": "127.0.0.1:1"}).returncode == 1
    for args in (["bogus"], ["users"], ["send"], ["sign-in", FICTIONAL, "--frob"], []):
        r = run(emu, *args)
        assert r.returncode == 64, args
    r = run(emu, "sign-in", FICTIONAL, "--frob")
    assert "--frob" in r.stderr
    r = run(emu, "codes", "--help")
    assert r.returncode == 0 and "Example:" in r.stdout


def test_users_create_with_providers_and_idp_sign_in(emu):
    """Issue 25: provider users from the command line (admin linkProviderUserInfo), and a sign-in with a test
    credential (signInWithIdp; on a build without it, the 404 is reported as an API error)."""
    r = run(emu, "users", "create", "--provider", "google.com:g-cli-1:ada@example.com", "--provider", "github.com:gh-cli-1",
            "--display-name", "Ada", "--json")
    assert r.returncode == 0, r.stderr
    user = json.loads(r.stdout)
    assert [(p["providerId"], p["rawId"], p.get("email"), p.get("displayName")) for p in user["providerUserInfo"]] == [
        ("google.com", "g-cli-1", "ada@example.com", "Ada"), ("github.com", "gh-cli-1", None, "Ada")]
    r = run(emu, "users", "get", user["localId"])
    assert r.returncode == 0 and "google.com g-cli-1 ada@example.com" in r.stdout and "github.com gh-cli-1" in r.stdout, r.stdout
    assert run(emu, "users", "create", "--provider", "google.com").returncode == 64

    has_idp = emu.itk("signInWithIdp", {}).status_code != 404
    r = run(emu, "idp", "sign-in", "google.com", "--sub", "g-cli-1", "--email", "ada@example.com", "--json")
    if has_idp:
        assert r.returncode == 0, r.stderr
        body = json.loads(r.stdout)
        assert body["localId"] == user["localId"] and body["providerId"] == "google.com" and body["idToken"].count(".") == 2
    else:
        assert r.returncode == 1 and "[HTTP 404]" in r.stderr, r.stderr
