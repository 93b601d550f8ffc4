"""firebase-tools mfa.spec.ts, the phone-SMS cases (TOTP is ported with the TOTP work), as raw HTTP against the
release binary."""
import pytest

from spec_support import (ITK2, TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2, TEST_PHONE_NUMBER_OBFUSCATED, answer_modified, blocking, decode,  # noqa: F401
                          err, expect_modified_claims, has_error, sign_in_with_email_link, spec)


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()
    spec.s.delete(f"{spec.url}/emulator/v1/projects/example/verificationCodes")


def v2(spec, op, body):
    return spec.post(f"{ITK2}/accounts/{op}", body)


def test_unverified_email(spec):
    id_token = spec.register_user(email="unverified@example.com", password="testing")["idToken"]
    assert err(v2(spec, "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": TEST_PHONE_NUMBER}})) == \
        (400, "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors.")


def test_phone_enrollment_for_existing_account(spec):
    id_token = sign_in_with_email_link(spec, "foo@example.com")["idToken"]
    r = v2(spec, "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": TEST_PHONE_NUMBER}})
    assert r.status_code == 200, r.text
    session = r.json()["phoneSessionInfo"]["sessionInfo"]
    codes = spec.verification_codes()
    assert len(codes) == 1 and codes[0]["phoneNumber"] == TEST_PHONE_NUMBER and codes[0]["sessionInfo"] == session
    r = v2(spec, "mfaEnrollment:finalize", {"idToken": id_token, "phoneVerificationInfo": {"code": codes[0]["code"], "sessionInfo": session}})
    assert r.status_code == 200 and r.json()["idToken"] and r.json()["refreshToken"], r.text
    # Production revokes the older ID token at enrollment (docs/differences.md): the new one reads the account.
    info = spec.account_by_id_token(r.json()["idToken"])
    assert len(info["mfaInfo"]) == 1 and info["mfaInfo"][0]["phoneInfo"] == TEST_PHONE_NUMBER
    fb = decode(r.json()["idToken"])["firebase"]
    assert fb["sign_in_second_factor"] == "phone" and fb["second_factor_identifier"] == info["mfaInfo"][0]["mfaEnrollmentId"]


def test_missing_phone_enrollment_info(spec):
    id_token = sign_in_with_email_link(spec, "foo@example.com")["idToken"]
    assert has_error(v2(spec, "mfaEnrollment:start", {"idToken": id_token}), "INVALID_ARGUMENT")


def test_invalid_phone_number(spec):
    id_token = sign_in_with_email_link(spec, "foo@example.com")["idToken"]
    assert has_error(v2(spec, "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": "notaphonenumber"}}), "INVALID_PHONE_NUMBER")


def test_duplicate_phone_number(spec):
    id_token = sign_in_with_email_link(spec, "foo@example.com")["idToken"]
    id_token = spec.enroll_phone_mfa(id_token, TEST_PHONE_NUMBER)["idToken"]
    assert err(v2(spec, "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": TEST_PHONE_NUMBER}})) == \
        (400, "SECOND_FACTOR_EXISTS : Phone number already enrolled as second factor for this account.")


def test_phone_first_factor_is_ineligible(spec):
    phone = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    spec.update_account_by_local_id(phone["localId"], email="bob@example.com", emailVerified=True)
    # The email change revokes older tokens here (production): sign in with the phone again for a current token.
    id_token = spec.sign_in_with_phone(TEST_PHONE_NUMBER)["idToken"]
    assert err(v2(spec, "mfaEnrollment:start", {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": TEST_PHONE_NUMBER_2}})) == \
        (400, "UNSUPPORTED_FIRST_FACTOR : MFA is not available for the given first factor.")


OPS = ["mfaEnrollment:start", "mfaEnrollment:finalize", "mfaSignIn:start", "mfaSignIn:finalize", "mfaEnrollment:withdraw"]


@pytest.mark.parametrize("op", OPS)
def test_auth_disabled(spec, op):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(v2(spec, op, {"tenantId": tenant["tenantId"]})) == (400, "PROJECT_DISABLED")


@pytest.mark.parametrize("op", OPS[:4])
@pytest.mark.parametrize("mfa", [{"state": "DISABLED"}, {"state": "ENABLED", "enabledProviders": ["PROVIDER_UNSPECIFIED"]}])
def test_sms_mfa_not_enabled(spec, op, mfa):
    tenant = spec.register_tenant(disableAuth=False, mfaConfig=mfa)
    assert has_error(v2(spec, op, {"tenantId": tenant["tenantId"]}), "OPERATION_NOT_ALLOWED")


def mfa_user(spec, addr="foo@example.com", password="abcdef"):
    up = spec.register_user(email=addr, password=password)
    spec.update_account_by_local_id(up["localId"], emailVerified=True)
    id_token = spec.sign_in_with_password(addr, password)["idToken"]
    spec.enroll_phone_mfa(id_token, TEST_PHONE_NUMBER)
    spec.s.delete(f"{spec.url}/emulator/v1/projects/example/verificationCodes")
    return up["localId"]


def advance(spec, millis):
    assert spec.s.post(f"{spec.url}/emulator/v1/clock:advance", json={"seconds": millis / 1000}).status_code == 200


def start_second_factor(spec, addr="foo@example.com", password="abcdef"):
    first = spec.sign_in_with_password(addr, password, mfa_pending=True)
    pending, enrollment = first["mfaPendingCredential"], first["mfaInfo"][0]["mfaEnrollmentId"]
    r = v2(spec, "mfaSignIn:start", {"mfaEnrollmentId": enrollment, "mfaPendingCredential": pending})
    assert r.status_code == 200, r.text
    session = r.json()["phoneResponseInfo"]["sessionInfo"]
    return pending, enrollment, session, spec.code_for_session(session)


def test_sign_in_with_pending_credential(spec):
    local_id = mfa_user(spec)
    before = spec.account_by_local_id(local_id)
    advance(spec, 3333)
    r = spec.itk("signInWithPassword", {"email": "foo@example.com", "password": "abcdef"})
    assert r.status_code == 200 and "idToken" not in r.json() and "refreshToken" not in r.json(), r.text
    info = r.json()["mfaInfo"]
    assert isinstance(r.json()["mfaPendingCredential"], str) and len(info) == 1
    assert info[0]["phoneInfo"] == TEST_PHONE_NUMBER_OBFUSCATED and "unobfuscatedPhoneInfo" not in info[0]
    after_first = spec.account_by_local_id(local_id)
    assert after_first["lastLoginAt"] == before["lastLoginAt"] and after_first["lastRefreshAt"] == before["lastRefreshAt"]
    advance(spec, 4444)
    pending, enrollment = r.json()["mfaPendingCredential"], info[0]["mfaEnrollmentId"]
    r = v2(spec, "mfaSignIn:start", {"mfaEnrollmentId": enrollment, "mfaPendingCredential": pending})
    assert r.status_code == 200, r.text
    session = r.json()["phoneResponseInfo"]["sessionInfo"]
    advance(spec, 5555)
    r = v2(spec, "mfaSignIn:finalize", {"mfaPendingCredential": pending, "phoneVerificationInfo": {"sessionInfo": session, "code": spec.code_for_session(session)}})
    assert r.status_code == 200 and r.json()["idToken"] and r.json()["refreshToken"], r.text
    c = decode(r.json()["idToken"])
    assert c["firebase"]["sign_in_second_factor"] == "phone" and c["firebase"]["second_factor_identifier"] == enrollment
    after = spec.account_by_local_id(local_id)
    assert int(after["lastLoginAt"]) - int(before["lastLoginAt"]) >= 13332
    assert after["lastRefreshAt"] > before["lastRefreshAt"]


def test_withdraw(spec):
    token1 = sign_in_with_email_link(spec, "foo@example.com")["idToken"]
    id_token = spec.enroll_phone_mfa(token1, TEST_PHONE_NUMBER)["idToken"]
    mfa_info = spec.account_by_id_token(id_token)["mfaInfo"]
    assert len(mfa_info) == 1
    r = v2(spec, "mfaEnrollment:withdraw", {"idToken": id_token, "mfaEnrollmentId": mfa_info[0]["mfaEnrollmentId"]})
    assert r.status_code == 200 and r.json()["idToken"] and r.json()["refreshToken"], r.text
    fb = decode(r.json()["idToken"])["firebase"]
    assert "sign_in_second_factor" not in fb and "second_factor_identifier" not in fb
    # An empty list is left out (production's JSON); the withdraw's own ID token reads the account.
    assert spec.account_by_id_token(r.json()["idToken"]).get("mfaInfo", []) == []


def test_before_sign_in_at_second_factor(spec, blocking):
    mfa_user(spec)
    advance(spec, 3333)
    pending, enrollment, session, code = start_second_factor(spec)
    blocking.configure("beforeSignIn")
    answer_modified(blocking, "beforeSignIn", session=True)
    r = v2(spec, "mfaSignIn:finalize", {"mfaPendingCredential": pending, "phoneVerificationInfo": {"sessionInfo": session, "code": code}})
    assert r.status_code == 200, r.text
    c = decode(r.json()["idToken"])
    assert c["firebase"]["sign_in_second_factor"] == "phone" and c["firebase"]["second_factor_identifier"] == enrollment
    expect_modified_claims(c, session=True)


def test_before_sign_in_disables_at_second_factor(spec, blocking):
    mfa_user(spec)
    pending, _, session, code = start_second_factor(spec)
    blocking.configure("beforeSignIn")
    blocking.answer("/beforeSignIn", 200, {"userRecord": {"updateMask": "disabled", "disabled": True}})
    assert err(v2(spec, "mfaSignIn:finalize", {"mfaPendingCredential": pending, "phoneVerificationInfo": {"sessionInfo": session, "code": code}})) == \
        (400, "USER_DISABLED")
