"""Issue 13 item 6: the whole SMS multi-factor flow as a person at a terminal does it with the `phone-auth` CLI, run as a
subprocess (the release binary) against the running emulator: users create --email/--password, mfa enroll (a fictional
number and an inbox number), mfa list, mfa sign-in, oob-codes after a PASSWORD_RESET, mfa unenroll."""
import json
import os
import pty
import subprocess
import time

from conftest import FICTIONAL, claims_of
from test_cli import CLI, run

EMAIL = "ada@example.com"
PASSWORD = "secret123"
INBOX_NUMBER = "+15551234001"


def rows_of(text):
    """The aligned `key: value` lines of the human output."""
    return dict((k.strip(), v.strip()) for k, v in (l.split(":", 1) for l in text.splitlines()))


def ok_json(emu, *args):
    r = run(emu, *args, "--json")
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_the_whole_mfa_flow_at_a_terminal(fresh):
    emu = fresh()
    # users create: an email + password user with a verified email.
    user = ok_json(emu, "users", "create", "--email", EMAIL, "--password", PASSWORD, "--email-verified", "--display-name", "Ada")
    uid = user["localId"]
    assert user["email"] == EMAIL and user["emailVerified"] is True and user["displayName"] == "Ada"
    assert PASSWORD not in json.dumps(user)
    r = run(emu, "users", "get", uid)
    assert r.returncode == 0 and rows_of(r.stdout)["email verified"] == "yes", r.stdout
    # The same email again: the server's code, exit 1.
    r = run(emu, "users", "create", "--email", EMAIL, "--password", PASSWORD)
    assert r.returncode == 1 and "EMAIL_EXISTS" in r.stderr, r.stderr

    # Nothing enrolled yet: mfa sign-in says so (the password alone signs in).
    r = run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD)
    assert r.returncode == 1 and "no second factor" in r.stderr, r.stderr
    r = run(emu, "mfa", "list", uid)
    assert r.returncode == 0 and r.stdout.strip() == "no second factors"

    # mfa enroll with the fictional number: a wrong --code is the server's INVALID_CODE, the preset code enrolls.
    r = run(emu, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", FICTIONAL, "--code", "000000")
    assert r.returncode == 1 and "INVALID_CODE" in r.stderr, r.stderr
    r = run(emu, "mfa", "enroll", "--email", EMAIL, "--password", "wrong-password", "--phone", FICTIONAL, "--code", "123456")
    assert r.returncode == 1 and "INVALID_LOGIN_CREDENTIALS" in r.stderr, r.stderr
    first = ok_json(emu, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", FICTIONAL, "--code", "123456",
                    "--display-name", "fictional")
    assert first["localId"] == uid
    fictional_id = first["mfaEnrollment"]["mfaEnrollmentId"]
    assert first["mfaEnrollment"]["phoneInfo"] == FICTIONAL and first["mfaEnrollment"]["displayName"] == "fictional"
    assert claims_of(first["idToken"])["firebase"]["sign_in_second_factor"] == "phone"

    # A second factor on an inbox number: the password sign-in now needs the fictional factor first; both codes
    # come from the verification-code inbox (no --code), as the human output shows.
    r = run(emu, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", INBOX_NUMBER, "--display-name", "inbox")
    assert r.returncode == 0, r.stderr
    rows = rows_of(r.stdout)
    assert rows["uid"] == uid and rows["phone"] == INBOX_NUMBER and rows["masked"] == "+*******4001"
    assert rows["display name"] == "inbox" and rows["enrolled at"].endswith("Z")
    inbox_id = rows["enrollment id"]
    assert inbox_id != fictional_id
    # Both codes were used; only the enrollment attempt with the wrong code is still pending.
    left = ok_json(emu, "codes")["verificationCodes"]
    assert [(c["phoneNumber"], c["kind"]) for c in left] == [(FICTIONAL, "mfaEnrollment")]

    # mfa list: both factors, full and masked numbers, names, enrolledAt.
    listed = ok_json(emu, "mfa", "list", uid)["mfaInfo"]
    assert [(e["mfaEnrollmentId"], e["phoneInfo"], e["displayName"]) for e in listed] == \
        [(fictional_id, FICTIONAL, "fictional"), (inbox_id, INBOX_NUMBER, "inbox")]
    r = run(emu, "mfa", "list", uid)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ENROLLMENT", "ID", "TYPE", "PHONE", "MASKED", "DISPLAY", "NAME", "ENROLLED", "AT"]
    assert lines[1].split()[:5] == [fictional_id, "phone", FICTIONAL, "+*******4567", "fictional"]
    assert lines[2].split()[:5] == [inbox_id, "phone", INBOX_NUMBER, "+*******4001", "inbox"]

    # mfa sign-in: the first factor by default (told on stderr when there are several), or --enrollment.
    r = run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD)
    assert r.returncode == 0, r.stderr
    assert "--enrollment" in r.stderr and fictional_id in r.stderr
    rows = rows_of(r.stdout)
    assert rows["uid"] == uid and rows["sign_in_second_factor"] == "phone" and rows["second_factor_identifier"] == fictional_id
    signed = ok_json(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD, "--enrollment", inbox_id)
    assert signed["localId"] == uid and signed["signInSecondFactor"] == "phone" and signed["secondFactorIdentifier"] == inbox_id
    claims = claims_of(signed["idToken"])
    assert claims["sub"] == uid and claims["firebase"]["sign_in_second_factor"] == "phone"
    assert claims["firebase"]["second_factor_identifier"] == inbox_id
    assert run(emu, "token", "verify", signed["idToken"]).returncode == 0
    r = run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD, "--enrollment", fictional_id, "--code", "000000", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "INVALID_CODE"
    r = run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD, "--enrollment", "no-such-enrollment")
    assert r.returncode == 1 and "MFA_ENROLLMENT_NOT_FOUND" in r.stderr, r.stderr

    # A PASSWORD_RESET sent as an app sends it (a plain request); oob-codes shows it, --wait answers it.
    assert ok_json(emu, "oob-codes")["oobCodes"] == []
    assert run(emu, "oob-codes").stdout.strip() == "no out-of-band codes"
    resp = emu.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": EMAIL})
    assert resp.status_code == 200, resp.text
    codes = ok_json(emu, "oob-codes", "--email", EMAIL)["oobCodes"]
    assert [c["requestType"] for c in codes] == ["PASSWORD_RESET"] and codes[0]["email"] == EMAIL
    oob = codes[0]["oobCode"]
    assert "oobCode=" + oob in codes[0]["oobLink"]
    r = run(emu, "oob-codes")
    assert r.returncode == 0
    header, row = r.stdout.splitlines()
    assert header.split() == ["EMAIL", "REQUEST", "TYPE", "OOB", "CODE", "OOB", "LINK"]
    assert row.split() == [EMAIL, "PASSWORD_RESET", oob, codes[0]["oobLink"]]
    waited = ok_json(emu, "oob-codes", "--email", EMAIL, "--wait", "--timeout", "5")
    assert waited["oobCode"] == oob and waited["requestType"] == "PASSWORD_RESET"
    assert ok_json(emu, "oob-codes", "--email", "nobody@example.com")["oobCodes"] == []
    r = run(emu, "oob-codes", "--email", "nobody@example.com", "--wait", "--timeout", "0")
    assert r.returncode == 1 and "NOT_FOUND" in r.stderr
    # The code resets the password; the CLI signs in with the new one (and still needs the second factor).
    resp = emu.itk("resetPassword", {"oobCode": oob, "newPassword": "newsecret456"})
    assert resp.status_code == 200, resp.text
    assert run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD).returncode == 1
    assert ok_json(emu, "mfa", "sign-in", "--email", EMAIL, "--password", "newsecret456")["signInSecondFactor"] == "phone"

    # mfa unenroll: one factor, then the other; then the password alone signs in again.
    r = run(emu, "mfa", "unenroll", uid, "no-such-enrollment")
    assert r.returncode == 1 and "MFA_ENROLLMENT_NOT_FOUND" in r.stderr
    gone = ok_json(emu, "mfa", "unenroll", uid, fictional_id)
    assert gone == {"localId": uid, "removed": fictional_id, "remaining": 1}
    left = ok_json(emu, "mfa", "list", uid)["mfaInfo"]
    assert [(e["mfaEnrollmentId"], e["phoneInfo"], e["displayName"]) for e in left] == [(inbox_id, INBOX_NUMBER, "inbox")]
    assert left[0]["enrolledAt"] == listed[1]["enrolledAt"]  # the remaining one kept as it was
    signed = ok_json(emu, "mfa", "sign-in", "--email", EMAIL, "--password", "newsecret456")
    assert signed["secondFactorIdentifier"] == inbox_id
    r = run(emu, "mfa", "unenroll", uid, inbox_id)
    assert r.returncode == 0 and rows_of(r.stdout)["second factors left"] == "0", r.stdout
    assert run(emu, "mfa", "list", uid).stdout.strip() == "no second factors"
    r = run(emu, "mfa", "sign-in", "--email", EMAIL, "--password", "newsecret456")
    assert r.returncode == 1 and "no second factor" in r.stderr


def test_users_create_phone_and_both(fresh):
    emu = fresh()
    phone_user = ok_json(emu, "users", "create", "--phone", "+15551234500")
    assert phone_user["phoneNumber"] == "+15551234500" and "email" not in phone_user
    both = ok_json(emu, "users", "create", "--uid", "grace", "--email", "Grace@Example.com", "--password", PASSWORD,
                   "--phone", "+15551234501", "--display-name", "Grace")
    assert both["localId"] == "grace" and both["phoneNumber"] == "+15551234501" and both["emailVerified"] is False
    assert both["email"].lower() == "grace@example.com"
    # Its password works; its email is not verified, so enrolling a second factor is refused with the server's code.
    r = run(emu, "mfa", "enroll", "--email", "grace@example.com", "--password", PASSWORD, "--phone", FICTIONAL, "--code", "123456")
    assert r.returncode == 1 and "UNVERIFIED_EMAIL" in r.stderr, r.stderr
    assert run(emu, "users", "create", "--phone", "not-a-number").returncode == 1
    assert run(emu, "users", "create", "--email", "a@b.co", "--password", "123").returncode == 1  # WEAK_PASSWORD
    assert run(emu, "users", "create", "--email", "a@b.co").returncode == 64


def test_tenant_flow(fresh):
    emu = fresh()
    r = emu.post("/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", {"displayName": "team-mfa", "allowPasswordSignup": True}, key=None,
                 headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200, r.text
    tenant = r.json()["name"].rsplit("/", 1)[1]
    uid = ok_json(emu, "--tenant", tenant, "users", "create", "--email", EMAIL, "--password", PASSWORD, "--email-verified")["localId"]
    # A new tenant has SMS MFA off, as in production: the server's answer, exit 1. Then it is switched on.
    r = run(emu, "--tenant", tenant, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", INBOX_NUMBER)
    assert r.returncode == 1 and "OPERATION_NOT_ALLOWED" in r.stderr, r.stderr
    r = emu.session.patch(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/{tenant}",
                          params={"updateMask": "mfaConfig"}, headers={"Authorization": "Bearer owner"},
                          json={"mfaConfig": {"state": "ENABLED", "enabledProviders": ["PHONE_SMS"]}})
    assert r.status_code == 200, r.text
    enrolled = ok_json(emu, "--tenant", tenant, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", INBOX_NUMBER)
    assert claims_of(enrolled["idToken"])["firebase"]["tenant"] == tenant
    signed = ok_json(emu, "--tenant", tenant, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD)
    assert signed["localId"] == uid and claims_of(signed["idToken"])["firebase"]["tenant"] == tenant
    # The project itself has no such user, and its inboxes are separate.
    assert run(emu, "mfa", "list", uid).returncode == 1
    resp = emu.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": EMAIL, "tenantId": tenant})
    assert resp.status_code == 200, resp.text
    assert [c["requestType"] for c in ok_json(emu, "--tenant", tenant, "oob-codes")["oobCodes"]] == ["PASSWORD_RESET"]
    assert ok_json(emu, "oob-codes")["oobCodes"] == []
    assert ok_json(emu, "--tenant", tenant, "mfa", "unenroll", uid, enrolled["mfaEnrollment"]["mfaEnrollmentId"])["remaining"] == 0


def test_server_text_is_terminal_safe(fresh):
    emu = fresh()
    uid = ok_json(emu, "users", "create", "--email", EMAIL, "--password", PASSWORD, "--email-verified")["localId"]
    # The factor's display name comes back from the server: a bidi override is shown as an escape, never raw.
    r = run(emu, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", FICTIONAL, "--code", "123456",
            "--display-name", "\u202eevil")
    assert r.returncode == 0, r.stderr
    assert "\u202e" not in r.stdout and "\\u{202E}evil" in r.stdout, r.stdout
    out = run(emu, "mfa", "list", uid).stdout
    assert "\u202e" not in out and "\\u{202E}evil" in out, out
    js = run(emu, "mfa", "list", uid, "--json").stdout
    assert "\u202e" not in js and json.loads(js)["mfaInfo"][0]["displayName"] == "\u202eevil"


def test_fictional_code_is_asked_at_a_terminal(fresh):
    emu = fresh()
    ok_json(emu, "users", "create", "--email", EMAIL, "--password", PASSWORD, "--email-verified")
    ok_json(emu, "mfa", "enroll", "--email", EMAIL, "--password", PASSWORD, "--phone", FICTIONAL, "--code", "123456")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLI, [CLI, "mfa", "sign-in", "--email", EMAIL, "--password", PASSWORD, "--emulator", emu.url, "--json"])
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
        if not sent and b"Enter the code for " + FICTIONAL.encode() in out:
            os.write(fd, b"123456\n")
            sent = True
    _, status = os.waitpid(pid, 0)
    assert sent, out
    assert os.WEXITSTATUS(status) == 0, out
    assert b'"signInSecondFactor": "phone"' in out or b'"signInSecondFactor" : "phone"' in out, out


def test_usage_errors_and_help(emu):
    for args in (["mfa"], ["mfa", "list"], ["mfa", "enroll", "--email", EMAIL], ["oob-codes", "--wait"],
                 ["oob-codes", "--timeout", "3"], ["users", "create"], ["mfa", "unenroll", "x"]):
        r = run(emu, *args)
        assert r.returncode == 64, (args, r.stderr)
    for words in (["users", "create"], ["oob-codes"], ["mfa", "list"], ["mfa", "enroll"], ["mfa", "sign-in"], ["mfa", "unenroll"]):
        r = run(emu, *words, "--help")
        assert r.returncode == 0 and "Usage: phone-auth " + " ".join(words) in r.stdout and "Example:" in r.stdout
