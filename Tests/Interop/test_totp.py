"""Issue 27 item 2: TOTP second factors against the release binary. The real JS SDK (TotpMultiFactorGenerator) with
codes from pyotp, an independent RFC 6238 implementation, and from the emulator's current-code helper; the wire in
production's shapes over HTTP; firebase-admin's get_user; the CLI; --data-dir and export/import carrying the secret."""
import json
import os
import shutil
import subprocess
import sys

import pyotp
import pytest
from firebase_admin import auth

from conftest import Emulator, claims_of, error_message
from test_cli import run

ADMIN = {"Authorization": "Bearer owner"}
V2 = "/identitytoolkit.googleapis.com/v2/accounts/"
PROJECT = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"
ENABLE = {"mfa": {"providerConfigs": [{"state": "ENABLED", "totpProviderConfig": {"adjacentIntervals": 1}}]}}


def enable_totp(emu, body=ENABLE):
    r = emu.session.patch(f"{emu.url}/emulator/v1/projects/demo-phone/config", json=body)
    assert r.status_code == 200, r.text


def now(emu):
    return emu.session.get(f"{emu.url}/emulator/v1/clock").json()["nowMillis"] // 1000


def next_step(emu):
    assert emu.post("/emulator/v1/clock:advance", {"seconds": 30}, key=None).status_code == 200


def password_user(emu, email):
    r = emu.itk("signUp", {"email": email, "password": "secret123"})
    assert r.status_code == 200, r.text
    uid = r.json()["localId"]
    assert emu.post(PROJECT + "/accounts:update", {"localId": uid, "emailVerified": True}, key=None, headers=ADMIN).status_code == 200
    r = emu.itk("signInWithPassword", {"email": email, "password": "secret123"})
    return uid, r.json()["idToken"]


def enroll_totp(emu, id_token):
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": id_token, "totpEnrollmentInfo": {}})
    assert r.status_code == 200, r.text
    info = r.json()["totpSessionInfo"]
    code = pyotp.TOTP(info["sharedSecretKey"]).at(now(emu))
    r = emu.post(V2 + "mfaEnrollment:finalize", {"idToken": id_token, "displayName": "authenticator",
                                                  "totpVerificationInfo": {"sessionInfo": info["sessionInfo"], "verificationCode": code}})
    assert r.status_code == 200, r.text
    return info, r.json()


def totp_sign_in(emu, email, enrollment_id, code):
    first = emu.itk("signInWithPassword", {"email": email, "password": "secret123"}).json()
    assert "idToken" not in first and first["mfaInfo"][0]["totpInfo"] == {}, first
    return emu.post(V2 + "mfaSignIn:finalize", {"mfaPendingCredential": first["mfaPendingCredential"], "mfaEnrollmentId": enrollment_id,
                                               "totpVerificationInfo": {"verificationCode": code}})


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_totp_flow_with_pyotp_and_the_helper(admin):
    """Tests/Interop/js/totp_flow.cjs: generateSecret → pyotp code → assertionForEnrollment; MFA-required sign-in, a
    wrong code, pyotp's and the helper's codes, a spent step refused, phone and TOTP side by side; then firebase-admin."""
    emu, app = admin
    enable_totp(emu)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "totp_flow.cjs")
    r = subprocess.run(["node", script], env={**os.environ, "EMULATOR_URL": emu.url, "TOTP_PYTHON": sys.executable},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["secret"] == {"length": 32, "hashingAlgorithm": "SHA1", "codeLength": 6, "codeIntervalSeconds": 30,
                             "deadline": out["secret"]["deadline"]} and out["secret"]["deadline"].endswith("GMT")
    assert out["qr"].startswith("otpauth://totp/Emulator:ada?secret=") and "algorithm=SHA1&digits=6" in out["qr"]
    assert out["enrolled"][0]["factorId"] == "totp" and out["enrolled"][0]["displayName"] == "authenticator"
    assert out["enrollSecondFactor"] == "totp"
    assert out["hint"]["factorId"] == "totp" and out["hint"]["uid"] == out["enrolled"][0]["uid"]
    assert out["wrongCode"] == "auth/invalid-verification-code" and out["replay"] == "auth/invalid-verification-code"
    assert out["pyotpSignIn"] == {"secondFactor": "totp", "identifier": out["hint"]["uid"], "provider": "password"}
    assert out["refreshedSecondFactor"] == "totp" and out["helperSignIn"] == "totp"
    assert out["both"] == ["totp", "phone"] and out["hints"] == ["totp", "phone"]
    assert out["choosePhone"] == "phone" and out["chooseTotp"] == "totp"
    for call in ("mfaEnrollment:start", "mfaEnrollment:finalize", "mfaSignIn:finalize"):
        assert any(call in line and line.endswith(" 200") for line in out["requests"]), call
    # firebase-admin (Python, unmodified; it has no multi-factor model): the record it reads has the TOTP factor.
    user = auth.get_user(out["uid"], app=app)
    factors = user._data["mfaInfo"]
    assert [("totpInfo" in f, "phoneInfo" in f) for f in factors] == [(True, False), (False, True)]
    assert factors[0]["totpInfo"] == {} and factors[0]["mfaEnrollmentId"] == out["totpEnrollmentId"]
    assert factors[0]["displayName"] == "authenticator"
    # Node firebase-admin (13.x) builds its TotpMultiFactorInfo from it, when its package is at hand.
    node_admin = os.environ.get("FIREBASE_ADMIN_NODE_DIR")
    if node_admin:
        script = ("const p=require('path'),nm=p.join(process.argv[1],'node_modules');"
                  "const {initializeApp}=require(p.join(nm,'firebase-admin/lib/app/index.js'));"
                  "const {getAuth}=require(p.join(nm,'firebase-admin/lib/auth/index.js'));"
                  "getAuth(initializeApp({projectId:'demo-phone'})).getUser(process.argv[2]).then(u=>"
                  "console.log(JSON.stringify(u.multiFactor.enrolledFactors.map(f=>f.toJSON()))))")
        r = subprocess.run(["node", "-e", script, node_admin, out["uid"]], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "FIREBASE_AUTH_EMULATOR_HOST": emu.host_port})
        assert r.returncode == 0, r.stderr
        enrolled = json.loads(r.stdout)
        assert [f["factorId"] for f in enrolled] == ["totp", "phone"], enrolled
        assert enrolled[0]["uid"] == out["totpEnrollmentId"] and enrolled[0]["displayName"] == "authenticator"


def test_totp_over_http_in_productions_shapes(fresh):
    emu = fresh()
    uid, token = password_user(emu, "t@example.com")
    # Off by default (production's default): the start is refused.
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": token, "totpEnrollmentInfo": {}})
    assert r.status_code == 400 and error_message(r) == "OPERATION_NOT_ALLOWED : TOTP based MFA not enabled."
    enable_totp(emu)
    # The v2 admin config shows it.
    cfg = emu.session.get(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", headers=ADMIN).json()
    assert cfg["mfa"]["providerConfigs"] == ENABLE["mfa"]["providerConfigs"]
    info, fin = enroll_totp(emu, token)
    assert len(info["sharedSecretKey"]) == 32 and info["verificationCodeLength"] == 6 and info["periodSec"] == 30
    assert info["hashingAlgorithm"] == "SHA1" and info["finalizeEnrollmentTime"].endswith("Z")
    fb = claims_of(fin["idToken"])["firebase"]
    assert fb["sign_in_second_factor"] == "totp"
    enrollment = fb["second_factor_identifier"]
    secret = pyotp.TOTP(info["sharedSecretKey"])
    # The enrollment's own code signs in once, then it is spent; a wrong code; then the next step's code (pyotp at the
    # emulator's time).
    r = totp_sign_in(emu, "t@example.com", enrollment, secret.at(now(emu)))
    assert r.status_code == 200, r.text
    r = totp_sign_in(emu, "t@example.com", enrollment, secret.at(now(emu)))
    assert r.status_code == 400 and error_message(r) == "INVALID_CODE"
    next_step(emu)
    good = secret.at(now(emu))
    r = totp_sign_in(emu, "t@example.com", enrollment, "%06d" % ((int(good) + 1) % 1_000_000))
    assert error_message(r) == "INVALID_CODE"
    r = totp_sign_in(emu, "t@example.com", enrollment, good)
    assert r.status_code == 200, r.text
    assert claims_of(r.json()["idToken"])["firebase"]["second_factor_identifier"] == enrollment
    # adjacentIntervals 1: one step back is accepted, two are not (the clock moves on first: steps are spent).
    for _ in range(3):
        next_step(emu)
    t = now(emu)
    assert error_message(totp_sign_in(emu, "t@example.com", enrollment, secret.at(t - 60))) == "INVALID_CODE"
    assert totp_sign_in(emu, "t@example.com", enrollment, secret.at(t - 30)).status_code == 200
    # The helper: the code now, and that it is spent until the next step.
    h = emu.session.get(f"{emu.url}/emulator/v1/projects/demo-phone/totpCode", params={"localId": uid}).json()
    assert h["code"] == secret.at(t) and h["mfaEnrollmentId"] == enrollment and h["used"] is False
    assert info["sharedSecretKey"] not in json.dumps(h)
    # The CLI prints the same code.
    r = run(emu, "mfa", "totp-code", uid)
    assert r.returncode == 0 and r.stdout.strip() == secret.at(t), (r.stdout, r.stderr)
    r = run(emu, "mfa", "list", uid)
    assert r.returncode == 0 and "totp" in r.stdout, r.stdout
    # The secret is in no log line.
    assert info["sharedSecretKey"] not in emu.log()


def test_data_dir_and_export_import_carry_the_secret(tmp_path):
    data, export = str(tmp_path / "data"), str(tmp_path / "export")
    a = Emulator(["--data-dir", data, "--export-on-exit", export])
    try:
        enable_totp(a)
        uid, token = password_user(a, "d@example.com")
        info, fin = enroll_totp(a, token)
        enrollment = claims_of(fin["idToken"])["firebase"]["second_factor_identifier"]
    finally:
        assert a.stop() == 0
    secret = pyotp.TOTP(info["sharedSecretKey"])
    # The export: the emulator's field for the secret (lookups never show it).
    accounts = json.load(open(os.path.join(export, "auth_export", "accounts.json")))
    [record] = [u for u in accounts["users"] if u["localId"] == uid]
    assert record["mfaInfo"][0]["totpInfo"] == {"sharedSecretKey": info["sharedSecretKey"]}
    # --data-dir: after a restart the factor signs in (the enrollment's step stays spent).
    b = Emulator(["--data-dir", data])
    try:
        enable_totp(b)
        next_step(b)
        r = totp_sign_in(b, "d@example.com", enrollment, secret.at(now(b)))
        assert r.status_code == 200, r.text
        lookup = b.post(PROJECT + "/accounts:lookup", {"localId": [uid]}, key=None, headers=ADMIN).json()
        assert lookup["users"][0]["mfaInfo"][0]["totpInfo"] == {}
    finally:
        assert b.stop() == 0
    # --import: a fresh server signs the imported user in with the same secret.
    c = Emulator(["--import", export])
    try:
        enable_totp(c)
        r = totp_sign_in(c, "d@example.com", enrollment, secret.at(now(c)))
        assert r.status_code == 200, r.text
        assert claims_of(r.json()["idToken"])["firebase"]["sign_in_second_factor"] == "totp"
    finally:
        assert c.stop() == 0


def test_cli_enrolls_and_signs_in_with_a_totp_factor(fresh):
    emu = fresh()
    enable_totp(emu)

    def ok(*args):
        r = run(emu, *args, "--json")
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return json.loads(r.stdout)

    uid = ok("users", "create", "--email", "c@example.com", "--password", "secret123", "--email-verified")["localId"]
    enrolled = ok("mfa", "enroll", "--email", "c@example.com", "--password", "secret123", "--totp", "--display-name", "app")
    assert enrolled["mfaEnrollment"]["totpInfo"] == {} and enrolled["mfaEnrollment"]["displayName"] == "app"
    secret = pyotp.TOTP(enrolled["sharedSecretKey"])
    # Right after enrolling, the enrollment's code signs in once; then the step is spent: the CLI refuses to use it again.
    signed = ok("mfa", "sign-in", "--email", "c@example.com", "--password", "secret123")
    assert signed["signInSecondFactor"] == "totp"
    r = run(emu, "mfa", "sign-in", "--email", "c@example.com", "--password", "secret123")
    assert r.returncode != 0 and "already used" in r.stderr, (r.stdout, r.stderr)
    next_step(emu)
    signed = ok("mfa", "sign-in", "--email", "c@example.com", "--password", "secret123")
    assert signed["signInSecondFactor"] == "totp" and signed["secondFactorIdentifier"] == enrolled["mfaEnrollment"]["mfaEnrollmentId"]
    next_step(emu)
    # --code with pyotp's code works too.
    signed = ok("mfa", "sign-in", "--email", "c@example.com", "--password", "secret123", "--code", secret.at(now(emu)))
    assert signed["signInSecondFactor"] == "totp"
    listed = ok("mfa", "list", uid)["mfaInfo"]
    assert len(listed) == 1 and "totpInfo" in listed[0]
    ok("mfa", "unenroll", uid, listed[0]["mfaEnrollmentId"])
    assert ok("mfa", "list", uid)["mfaInfo"] == []
