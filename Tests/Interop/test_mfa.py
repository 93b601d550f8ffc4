"""Issue 13: SMS as a second factor against the release binary: the admin side through firebase-admin (Python, unmodified),
the phone first factor of an MFA user, the v2 enrollment endpoints with a fictional number and with an inbox number,
--data-dir kill -9."""
import json
import os
import shutil
import signal
import subprocess

import pytest
import requests
from firebase_admin import auth

from conftest import Emulator, FICTIONAL, claims_of, error_message

ADMIN = {"Authorization": "Bearer owner"}
V2 = "/identitytoolkit.googleapis.com/v2/accounts/"
PROJECT = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"


def password_user(emu, email):
    """A verified email/password user signed in with its password (client signUp, then the admin verifies the email)."""
    r = emu.itk("signUp", {"email": email, "password": "secret123"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert claims_of(body["idToken"])["firebase"]["sign_in_provider"] == "password"
    r = emu.post(PROJECT + "/accounts:update", {"localId": body["localId"], "emailVerified": True}, key=None, headers=ADMIN)
    assert r.status_code == 200, r.text
    return body["localId"], body["idToken"]


def enroll(emu, id_token, phone, code=None):
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": phone}})
    assert r.status_code == 200, r.text
    session = r.json()["phoneSessionInfo"]["sessionInfo"]
    if code is None:
        # The inbox long-poll answers with the pending code for the number (kind mfaEnrollment).
        w = emu.session.get(f"{emu.url}/emulator/v1/projects/demo-phone/verificationCodes:wait",
                            params={"phoneNumber": phone, "timeoutSeconds": "5"})
        assert w.status_code == 200, w.text
        assert w.json()["kind"] == "mfaEnrollment" and w.json()["sessionInfo"] == session
        code = w.json()["code"]
    r = emu.post(V2 + "mfaEnrollment:finalize", {"idToken": id_token, "displayName": "phone",
                                                  "phoneVerificationInfo": {"sessionInfo": session, "code": code}})
    assert r.status_code == 200, r.text
    return r.json()


def test_admin_enrollments_reach_firebase_admin_and_block_the_phone_first_factor(admin):
    emu, app = admin
    # What Node firebase-admin's createUser({multiFactor}) sends; Python's get_user reads the record back.
    r = emu.post(PROJECT + "/accounts", {"localId": "mfa-user", "email": "m@example.com", "emailVerified": True,
                                         "phoneNumber": "+15550101010",
                                         "mfaInfo": [{"phoneInfo": "+1 650 555 0100", "displayName": "work"}]}, key=None, headers=ADMIN)
    assert r.status_code == 200, r.text
    user = auth.get_user("mfa-user", app=app)
    enrollments = user._data["mfaInfo"]
    assert [e["phoneInfo"] for e in enrollments] == ["+16505550100"]
    assert enrollments[0]["displayName"] == "work" and len(enrollments[0]["mfaEnrollmentId"]) == 28
    # The phone alone no longer signs this user in (it did before: the enrollments were dropped).
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15550101010"})
    assert r.status_code == 400
    assert error_message(r) == "UNSUPPORTED_FIRST_FACTOR : A phone number cannot be set as a first factor on an SMS based MFA user."
    # updateUser({multiFactor: {enrolledFactors: null}}) sends mfa: {}: cleared, and the phone signs in again.
    r = emu.post(PROJECT + "/accounts:update", {"localId": "mfa-user", "mfa": {}}, key=None, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert "mfaInfo" not in auth.get_user("mfa-user", app=app)._data
    assert emu.itk("sendVerificationCode", {"phoneNumber": "+15550101010"}).status_code == 200
    # Replacing the list keeps the given ids; a missing id is refused as production.
    r = emu.post(PROJECT + "/accounts:update", {"localId": "mfa-user", "mfa": {"enrollments": [
        {"phoneInfo": "+16505550100", "mfaEnrollmentId": "enr-1"}]}}, key=None, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert [e["mfaEnrollmentId"] for e in auth.get_user("mfa-user", app=app)._data["mfaInfo"]] == ["enr-1"]
    r = emu.post(PROJECT + "/accounts:update", {"localId": "mfa-user", "mfa": {"enrollments": [{"phoneInfo": "+16505550100"}]}},
                 key=None, headers=ADMIN)
    assert error_message(r) == "INVALID_MFA_ENROLLMENT_ID : mfaEnrollmentId must be defined."
    # batchCreate (import_users / firebase-tools import) keeps them too, with the official per-user errors.
    r = emu.post(PROJECT + "/accounts:batchCreate", {"users": [
        {"localId": "imp", "email": "i@example.com", "emailVerified": True, "mfaInfo": [{"phoneInfo": "+16505550111"}]},
        {"localId": "imp2", "email": "j@example.com", "mfaInfo": [{"phoneInfo": "+16505550111"}]}]}, key=None, headers=ADMIN)
    assert r.json()["error"] == [{"index": 1, "message": "Second factor account requires email to be verified."}]
    assert auth.get_user("imp", app=app)._data["mfaInfo"][0]["phoneInfo"] == "+16505550111"


@pytest.mark.parametrize("phone", [FICTIONAL, "+15557650001"], ids=["fictional", "inbox"])
def test_enrollment_tokens_refresh_and_withdraw(admin, phone):
    emu, app = admin
    uid, id_token = password_user(emu, f"u{phone[-4:]}@example.com")
    fin = enroll(emu, id_token, phone, code="123456" if phone == FICTIONAL else None)
    c = claims_of(fin["idToken"])
    assert c["firebase"]["sign_in_provider"] == "password"
    assert c["firebase"]["sign_in_second_factor"] == "phone"
    enrollment_id = c["firebase"]["second_factor_identifier"]
    # firebase-admin verifies the token and sees the second factor.
    decoded = auth.verify_id_token(fin["idToken"], app=app)
    assert decoded["firebase"]["sign_in_second_factor"] == "phone"
    # getIdToken(true): the refresh keeps the claims.
    r = emu.post("/securetoken.googleapis.com/v1/token", None, data={"grant_type": "refresh_token", "refresh_token": fin["refreshToken"]})
    assert r.status_code == 200, r.text
    assert claims_of(r.json()["access_token"])["firebase"]["second_factor_identifier"] == enrollment_id
    # lookup (what the SDKs call after enrolling) returns the enrollment.
    looked = emu.itk("lookup", {"idToken": fin["idToken"]}).json()["users"][0]
    assert [e["mfaEnrollmentId"] for e in looked["mfaInfo"]] == [enrollment_id]
    assert looked["mfaInfo"][0]["phoneInfo"] == phone
    # The same number again.
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": fin["idToken"], "phoneEnrollmentInfo": {"phoneNumber": phone}})
    assert error_message(r) == "SECOND_FACTOR_EXISTS : Phone number already enrolled as second factor for this account."
    # Unenroll.
    r = emu.post(V2 + "mfaEnrollment:withdraw", {"idToken": fin["idToken"], "mfaEnrollmentId": enrollment_id})
    assert r.status_code == 200, r.text
    assert "sign_in_second_factor" not in claims_of(r.json()["idToken"])["firebase"]
    assert "mfaInfo" not in auth.get_user(uid, app=app)._data


def test_enrollment_errors(emu):
    r = emu.post(V2 + "mfaEnrollment:start", {"phoneEnrollmentInfo": {"phoneNumber": FICTIONAL}})
    assert error_message(r) == "MISSING_ID_TOKEN"
    phone_user = emu.sign_in()
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": phone_user["idToken"], "phoneEnrollmentInfo": {"phoneNumber": "+16505550100"}})
    assert error_message(r) == "UNSUPPORTED_FIRST_FACTOR : MFA is not available for the given first factor."
    unverified = emu.itk("signUp", {"email": "nv@example.com", "password": "secret123"}).json()["idToken"]
    r = emu.post(V2 + "mfaEnrollment:start", {"idToken": unverified, "phoneEnrollmentInfo": {"phoneNumber": "+16505550100"}})
    assert error_message(r) == "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors."
    r = emu.post(V2 + "mfaSignIn:start", {"mfaPendingCredential": "forged", "mfaEnrollmentId": "x"})
    assert error_message(r) == "INVALID_MFA_PENDING_CREDENTIAL"
    r = emu.post(V2 + "mfaSignIn:finalize", {"phoneVerificationInfo": {"sessionInfo": "x", "code": "1"}})
    assert error_message(r) == "MISSING_CREDENTIAL : Please set MFA Pending Credential."


def test_enrollments_survive_kill_9(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    uid, id_token = password_user(a, "k@example.com")
    fin = enroll(a, id_token, FICTIONAL, code="123456")
    enrollment_id = claims_of(fin["idToken"])["firebase"]["second_factor_identifier"]
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()
    a.session.close()
    b = Emulator(["--data-dir", data])
    try:
        r = b.post(PROJECT + "/accounts:lookup", {"localId": [uid]}, key=None, headers=ADMIN)
        assert [e["mfaEnrollmentId"] for e in r.json()["users"][0]["mfaInfo"]] == [enrollment_id]
        r = b.post("/securetoken.googleapis.com/v1/token", None, data={"grant_type": "refresh_token", "refresh_token": fin["refreshToken"]})
        assert r.status_code == 200, r.text
        assert claims_of(r.json()["access_token"])["firebase"]["second_factor_identifier"] == enrollment_id
    finally:
        assert b.stop() == 0


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
@pytest.mark.parametrize("phone,code", [(FICTIONAL, "123456"), ("+15557659001", None)], ids=["fictional", "inbox"])
def test_js_sdk_mfa_flow(fresh, phone, code):
    """The real JS SDK's whole SMS second-factor flow (Tests/Interop/js/mfa_flow.cjs): enroll, MFA-required sign-in,
    wrong then right code, claims kept on refresh, unenroll; unverified-email, second-factor-already-in-use and
    unsupported-first-factor. With an inbox number every code comes from the verification-code inbox."""
    emu = fresh()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "mfa_flow.cjs")
    r = subprocess.run(["node", script, phone, *([code] if code else [])], env={**os.environ, "EMULATOR_URL": emu.url},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["phone"] == phone and out["fictional"] == (code is not None)
    assert out["unverifiedEmail"] == "auth/unverified-email"
    assert out["alreadyInUse"] == "auth/second-factor-already-in-use"
    assert out["mfaRequired"] == "auth/multi-factor-auth-required"
    assert out["wrongCode"] == "auth/invalid-verification-code"
    assert out["unsupportedFirstFactor"] == "auth/unsupported-first-factor"
    assert [f["phoneNumber"] for f in out["enrolled"]] == [phone] and out["enrolled"][0]["factorId"] == "phone"
    assert out["hint"]["phoneNumber"] != phone and out["hint"]["phoneNumber"].endswith(phone[-4:])
    assert out["signInProvider"] == "password" and out["signInSecondFactor"] == "phone" and out["refreshedSecondFactor"] == "phone"
    assert out["afterUnenroll"] == {"factors": 0, "signInSecondFactor": None}
    # The SDK went through the v2 endpoints (not a shortcut): enrollment and sign-in start/finalize, withdraw.
    for call in ("mfaEnrollment:start", "mfaEnrollment:finalize", "mfaSignIn:start", "mfaSignIn:finalize", "mfaEnrollment:withdraw"):
        assert any(call in line and line.endswith(" 200") for line in out["requests"]), (call, out["requests"])
