"""firebase-tools phone.spec.ts (phone sign-in), as raw HTTP against the release binary. Phone sign-in works in
tenants here (docs/differences.md), where the official emulator answers UNSUPPORTED_TENANT_OPERATION."""
import pytest

from spec_support import (TEST_MFA_INFO, TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2, blocking, blocking_sign_up_cases, decode,  # noqa: F401
                          err, expect_modified_claims, spec)


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()
    spec.s.delete(f"{spec.url}/emulator/v1/projects/example/verificationCodes")


def send(spec, body):
    return spec.itk("sendVerificationCode", body)


def sent(spec, phone=TEST_PHONE_NUMBER):
    r = send(spec, {"phoneNumber": phone, "recaptchaToken": "ignored"})
    assert r.status_code == 200, r.text
    session = r.json()["sessionInfo"]
    return session, spec.code_for_session(session)


def verify(spec, body):
    return spec.itk("signInWithPhoneNumber", body)


def test_recaptcha_params(spec):
    r = spec.s.get(f"{spec.url}/identitytoolkit.googleapis.com/v1/recaptchaParams", params={"key": "fake-api-key"})
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["recaptchaStoken"], str) and isinstance(r.json()["recaptchaSiteKey"], str)


def test_pretends_to_send_code(spec):
    session, _ = sent(spec)
    codes = spec.verification_codes()
    assert len(codes) == 1 and codes[0]["phoneNumber"] == TEST_PHONE_NUMBER and codes[0]["sessionInfo"] == session
    assert isinstance(codes[0]["code"], str)


@pytest.mark.parametrize("body", [{"recaptchaToken": "ignored"}, {"recaptchaToken": "ignored", "phoneNumber": "invalid"}])
def test_missing_or_invalid_number(spec, body):
    # Production's answer for a missing number too (not MISSING_PHONE_NUMBER).
    assert err(send(spec, body)) == (400, "INVALID_PHONE_NUMBER : Invalid format.")


@pytest.mark.parametrize("op", ["sendVerificationCode", "signInWithPhoneNumber"])
def test_auth_disabled_tenant(spec, op):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(spec.itk(op, {"tenantId": tenant["tenantId"]})) == (400, "PROJECT_DISABLED")


def test_phone_sign_in_in_tenant(spec):
    tenant = spec.register_tenant(disableAuth=False)
    signed = spec.sign_in_with_phone(TEST_PHONE_NUMBER, tenant["tenantId"])
    assert decode(signed["idToken"])["firebase"]["tenant"] == tenant["tenantId"]


def test_creates_account(spec):
    session, code = sent(spec)
    r = verify(spec, {"sessionInfo": session, "code": code})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["isNewUser"] is True and j["phoneNumber"] == TEST_PHONE_NUMBER and isinstance(j["refreshToken"], str)
    c = decode(j["idToken"])
    assert isinstance(c["user_id"], str) and c["phone_number"] == TEST_PHONE_NUMBER and "provider_id" not in c
    assert c["firebase"]["sign_in_provider"] == "phone" and c["firebase"]["identities"] == {"phone": [TEST_PHONE_NUMBER]}


def test_missing_session_or_code(spec):
    assert err(verify(spec, {"code": "123456"})) == (400, "MISSING_SESSION_INFO")
    assert err(verify(spec, {"sessionInfo": "something-something"})) == (400, "MISSING_CODE")


def test_invalid_session_or_code(spec):
    session, code = sent(spec)
    assert err(verify(spec, {"sessionInfo": "totally-invalid", "code": code})) == (400, "INVALID_SESSION_INFO")
    assert err(verify(spec, {"sessionInfo": session, "code": code + "1"})) == (400, "INVALID_CODE")


def test_disabled_user(spec):
    local_id = spec.sign_in_with_phone(TEST_PHONE_NUMBER)["localId"]
    spec.update_account_by_local_id(local_id, disableUser=True)
    session, code = sent(spec)
    assert err(verify(spec, {"sessionInfo": session, "code": code})) == (400, "USER_DISABLED")


def test_links_phone_to_account(spec):
    anon = spec.register_anon_user()
    session, code = sent(spec)
    r = verify(spec, {"sessionInfo": session, "code": code, "idToken": anon["idToken"]})
    assert r.status_code == 200, r.text
    assert r.json()["isNewUser"] is False and r.json()["phoneNumber"] == TEST_PHONE_NUMBER and r.json()["localId"] == anon["localId"]


def test_link_to_disabled_user(spec):
    anon = spec.register_anon_user()
    spec.update_account_by_local_id(anon["localId"], disableUser=True)
    session, code = sent(spec)
    assert err(verify(spec, {"sessionInfo": session, "code": code, "idToken": anon["idToken"]})) == (400, "USER_DISABLED")


FIRST_FACTOR = "UNSUPPORTED_FIRST_FACTOR : A phone number cannot be set as a first factor on an SMS based MFA user."


def test_link_to_mfa_user(spec):
    r = spec.itk("signUp", {"email": "alice@example.com", "password": "notasecret", "mfaInfo": [TEST_MFA_INFO]}, owner=True)
    assert r.status_code == 200, r.text
    # An admin-created user has no tokens: sign in with the custom-token-free route, the admin ID token endpoint.
    minted = spec.s.post(f"{spec.url}/emulator/v1/projects/example/idTokens", json={"uid": r.json()["localId"]})
    assert minted.status_code == 200, minted.text
    session, code = sent(spec)
    assert err(verify(spec, {"sessionInfo": session, "code": code, "idToken": minted.json()["idToken"]})) == (400, FIRST_FACTOR)


def test_mfa_user_phone_first_factor(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    spec.update_account_by_local_id(up["localId"], emailVerified=True, phoneNumber=TEST_PHONE_NUMBER)
    id_token = spec.sign_in_with_password("alice@example.com", "notasecret")["idToken"]
    spec.enroll_phone_mfa(id_token, TEST_PHONE_NUMBER_2)
    spec.s.delete(f"{spec.url}/emulator/v1/projects/example/verificationCodes")
    assert err(send(spec, {"phoneNumber": TEST_PHONE_NUMBER})) == (400, FIRST_FACTOR)
    assert spec.verification_codes() == []


def test_temporary_proof_for_a_number_of_another_account(spec):
    spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    anon = spec.register_anon_user()
    session, code = sent(spec)
    r = verify(spec, {"sessionInfo": session, "code": code, "idToken": anon["idToken"]})
    assert r.status_code == 200, r.text
    assert "idToken" not in r.json() and r.json()["phoneNumber"] == TEST_PHONE_NUMBER and isinstance(r.json()["temporaryProof"], str)
    again = verify(spec, {"idToken": anon["idToken"], "phoneNumber": TEST_PHONE_NUMBER, "temporaryProof": r.json()["temporaryProof"]})
    assert err(again) == (400, "PHONE_NUMBER_EXISTS")


def expect_modified(r, session=False):
    assert r.status_code == 200, r.text
    assert r.json()["isNewUser"] is True and r.json()["phoneNumber"] == TEST_PHONE_NUMBER and isinstance(r.json()["refreshToken"], str)
    expect_modified_claims(decode(r.json()["idToken"]), session)


def phone_sign_in(spec):
    session, code = sent(spec)
    return verify(spec, {"sessionInfo": session, "code": code})


(test_before_create_modifies_new_user, test_before_sign_in_modifies_user, test_before_sign_in_overwrites_before_create,
 test_before_create_disables_user) = blocking_sign_up_cases(phone_sign_in, expect_modified)
