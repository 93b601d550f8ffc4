"""firebase-tools signUp.spec.ts (accounts:signUp), as raw HTTP against the release binary. The IdP case is the IdP
helper's; the blocking-function cases use a real loopback function server instead of nock."""
import pytest

from spec_support import (DISPLAY_NAME, PHOTO_URL, PROJECT_ID, TEST_INVALID_PHONE_NUMBER, TEST_MFA_INFO, TEST_PHONE_NUMBER,
                          TEST_PHONE_NUMBER_2, blocking, blocking_sign_up_cases, decode, err, expect_modified_claims, has_error,
                          spec)  # noqa: F401


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()


def sign_up(spec, body, **kw):
    return spec.itk("signUp", body, **kw)


def admin_sign_up(spec, body):
    return spec.itk("signUp", body, owner=True)


def test_no_email(spec):
    assert err(sign_up(spec, {"password": "notasecret"})) == (400, "MISSING_EMAIL")


def test_empty_email_and_password(spec):
    # The official emulator reads an empty email and password as an anonymous sign-up with an invalid email
    # (INVALID_EMAIL); here an empty field is an absent one, as in proto3 JSON: MISSING_EMAIL (docs/differences.md).
    assert err(sign_up(spec, {"email": "", "password": ""})) == (400, "MISSING_EMAIL")


def test_anonymous_sign_up_issues_tokens(spec):
    r = sign_up(spec, {"returnSecureToken": True})
    assert r.status_code == 200 and isinstance(r.json()["refreshToken"], str)
    c = decode(r.json()["idToken"])
    assert isinstance(c["user_id"], str) and c["provider_id"] == "anonymous" and c["firebase"]["sign_in_provider"] == "anonymous"


def test_email_password_sign_up_issues_tokens(spec):
    r = sign_up(spec, {"email": "me@example.com", "password": "notasecret"})
    assert r.status_code == 200 and isinstance(r.json()["refreshToken"], str)
    c = decode(r.json()["idToken"])
    assert "provider_id" not in c and c["firebase"]["sign_in_provider"] == "password"
    assert c["firebase"]["identities"] == {"email": ["me@example.com"]}


def test_anonymous_sign_up_keeps_display_name_and_photo(spec):
    # The official emulator drops both for an anonymous sign-up (and photoUrl always); production's signUp takes them
    # as fields of the user to create, and so do we (docs/differences.md).
    r = sign_up(spec, {"displayName": "Me", "photoUrl": "http://localhost/my-profile.png"})
    assert r.status_code == 200 and r.json()["displayName"] == "Me" and "photoUrl" not in r.json()
    info = spec.account_by_id_token(r.json()["idToken"])
    assert info["displayName"] == "Me" and info["photoUrl"] == "http://localhost/my-profile.png"


def test_password_sign_up_sets_display_name_and_photo(spec):
    r = sign_up(spec, {"email": "me@example.com", "password": "notasecret", "displayName": "Me", "photoUrl": "http://localhost/my-profile.png"})
    assert r.status_code == 200 and r.json()["displayName"] == "Me" and "photoUrl" not in r.json()
    info = spec.account_by_id_token(r.json()["idToken"])
    assert info["displayName"] == "Me" and info["photoUrl"] == "http://localhost/my-profile.png"


def test_duplicate_email(spec):
    spec.register_user(email="bob@example.com", password="notasecret")
    assert err(sign_up(spec, {"email": "bob@example.com", "password": "notasecret"})) == (400, "EMAIL_EXISTS")
    assert err(sign_up(spec, {"email": "BOB@example.com", "password": "notasecret"})) == (400, "EMAIL_EXISTS")


def test_invalid_email(spec):
    assert err(sign_up(spec, {"email": "not.an.email.address.at.all", "password": "notasecret"})) == (400, "INVALID_EMAIL")


def test_email_is_lowercased(spec):
    r = sign_up(spec, {"email": "AlIcE@exAMPle.COM", "password": "notasecret"})
    assert r.status_code == 200 and r.json()["email"] == "alice@example.com"


def test_short_password(spec):
    status, message = err(sign_up(spec, {"email": "me@example.com", "password": "short"}))
    assert status == 400 and message.startswith("WEAK_PASSWORD")


def test_id_token_without_email_or_password(spec):
    id_token = spec.register_anon_user()["idToken"]
    assert err(sign_up(spec, {"idToken": id_token})) == (400, "MISSING_EMAIL")
    assert err(sign_up(spec, {"idToken": id_token, "email": "alice@example.com"})) == (400, "MISSING_PASSWORD")


def test_links_email_password_to_anonymous_user(spec):
    anon = spec.register_anon_user()
    r = sign_up(spec, {"idToken": anon["idToken"], "email": "alice@example.com", "password": "notasecret"})
    assert r.status_code == 200 and r.json()["localId"] == anon["localId"], r.text
    assert decode(r.json()["idToken"])["firebase"]["sign_in_provider"] == "password"


def test_links_email_password_to_phone_user(spec):
    phone = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    r = sign_up(spec, {"idToken": phone["idToken"], "email": "alice@example.com", "password": "notasecret"})
    assert r.status_code == 200 and r.json()["localId"] == phone["localId"], r.text
    c = decode(r.json()["idToken"])
    assert c["firebase"]["sign_in_provider"] == "password"
    assert c["firebase"]["identities"] == {"phone": [TEST_PHONE_NUMBER], "email": ["alice@example.com"]}


def test_link_to_disabled_account(spec):
    anon = spec.register_anon_user()
    spec.update_account_by_local_id(anon["localId"], disableUser=True)
    assert err(sign_up(spec, {"idToken": anon["idToken"], "email": "alice@example.com", "password": "notasecret"})) == (400, "USER_DISABLED")


def test_replaces_email_and_password_of_linked_account(spec):
    old = spec.register_user(email="alice@example.com", password="notasecret", displayName="Alice")
    r = sign_up(spec, {"idToken": old["idToken"], "email": "bob@example.com", "password": "notasecret2"})
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == old["localId"] and r.json()["email"] == "bob@example.com"
    c = decode(r.json()["idToken"])
    assert c["email"] == "bob@example.com" and c["firebase"]["identities"] == {"email": ["bob@example.com"]}
    info = spec.account_by_local_id(old["localId"])
    assert info["email"] == "bob@example.com" and info["displayName"] == "Alice"
    assert [p["providerId"] for p in info["providerUserInfo"]] == ["password"]
    assert spec.itk("signInWithPassword", {"email": "bob@example.com", "password": "notasecret2"}).status_code == 200
    # The old email no longer signs in (createAuthUri would tell only with email enumeration protection off).
    spec.legacy_email_errors()
    try:
        r = spec.itk("createAuthUri", {"continueUri": "http://example.com/", "identifier": "alice@example.com"})
        assert r.status_code == 200 and not r.json().get("signinMethods")
    finally:
        spec.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}}, "emailPrivacyConfig")


def test_admin_creates_phone_account(spec):
    r = admin_sign_up(spec, {"phoneNumber": TEST_PHONE_NUMBER, "displayName": "Alice"})
    assert r.status_code == 200, r.text
    assert "idToken" not in r.json() and "refreshToken" not in r.json()
    assert r.json()["displayName"] == "Alice" and r.json()["localId"]
    signed = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    assert signed["localId"] == r.json()["localId"]
    assert spec.account_by_id_token(signed["idToken"])["displayName"] == "Alice"


def test_local_id_from_a_client(spec):
    assert err(sign_up(spec, {"localId": "anything"})) == (400, "UNEXPECTED_PARAMETER : User ID")
    anon = spec.register_anon_user()
    assert err(admin_sign_up(spec, {"idToken": anon["idToken"], "localId": anon["localId"]})) == (400, "UNEXPECTED_PARAMETER : User ID")


def test_admin_chooses_local_id(spec):
    r = admin_sign_up(spec, {"localId": "haha"})
    assert r.status_code == 200 and r.json()["localId"] == "haha"
    assert "idToken" not in r.json() and "refreshToken" not in r.json()


def test_duplicate_local_id(spec):
    anon = spec.register_anon_user()
    assert err(admin_sign_up(spec, {"localId": anon["localId"]})) == (400, "DUPLICATE_LOCAL_ID")


def test_admin_invalid_phone_number(spec):
    assert err(admin_sign_up(spec, {"phoneNumber": TEST_INVALID_PHONE_NUMBER})) == (400, "INVALID_PHONE_NUMBER : Invalid format.")


# mfaInfo: the official specs send it with the API key; here (and, as far as its docs go, in production) it is an
# admin field, so the cases send it with `Bearer owner`.
def mfa_user(spec, mfa_info, email="alice@example.com"):
    r = admin_sign_up(spec, {"email": email, "password": "notasecret", "mfaInfo": mfa_info})
    assert r.status_code == 200, r.text
    return spec.account_by_local_id(r.json()["localId"])["mfaInfo"]


def includes(got, want):
    return all(got.get(k) == v for k, v in want.items())


def test_account_with_multi_factor_info(spec):
    saved = mfa_user(spec, [TEST_MFA_INFO])
    assert len(saved) == 1 and includes(saved[0], TEST_MFA_INFO) and saved[0]["mfaEnrollmentId"]


def test_account_with_two_factors(spec):
    saved = mfa_user(spec, [TEST_MFA_INFO, {**TEST_MFA_INFO, "phoneInfo": TEST_PHONE_NUMBER_2}])
    assert sorted(f["phoneInfo"] for f in saved) == [TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2]
    assert all(f["mfaEnrollmentId"] and f["displayName"] == "Cell Phone" for f in saved)


def test_factors_with_the_same_info_are_deduplicated(spec):
    saved = mfa_user(spec, [TEST_MFA_INFO] * 3)
    assert len(saved) == 1 and includes(saved[0], TEST_MFA_INFO) and saved[0]["mfaEnrollmentId"]
    saved = mfa_user(spec, [TEST_MFA_INFO] * 3 + [{**TEST_MFA_INFO, "phoneInfo": TEST_PHONE_NUMBER_2}], email="bob@example.com")
    assert sorted(f["phoneInfo"] for f in saved) == [TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2]


def test_factor_without_display_name(spec):
    saved = mfa_user(spec, [{"phoneInfo": TEST_PHONE_NUMBER}])
    assert len(saved) == 1 and saved[0]["phoneInfo"] == TEST_PHONE_NUMBER and saved[0]["mfaEnrollmentId"]
    assert "displayName" not in saved[0]


def test_invalid_factor_phone_number(spec):
    r = admin_sign_up(spec, {"email": "alice@example.com", "password": "notasecret", "mfaInfo": [{"phoneInfo": TEST_INVALID_PHONE_NUMBER}]})
    assert err(r) == (400, "INVALID_MFA_PHONE_NUMBER : Invalid format.")


def test_enrollment_ids_given_on_create_are_not_kept(spec):
    saved = mfa_user(spec, [{**TEST_MFA_INFO, "mfaEnrollmentId": "thisShouldBeIgnored1"},
                            {**TEST_MFA_INFO, "mfaEnrollmentId": "thisShouldBeIgnored2"}])
    assert len(saved) == 1 and includes(saved[0], TEST_MFA_INFO)
    assert saved[0]["mfaEnrollmentId"] not in ("thisShouldBeIgnored1", "thisShouldBeIgnored2", "")


def test_admin_created_factor_makes_password_sign_in_mfa_pending(spec):
    mfa_user(spec, [TEST_MFA_INFO])
    r = spec.itk("signInWithPassword", {"email": "alice@example.com", "password": "notasecret"})
    assert r.status_code == 200 and "idToken" not in r.json(), r.text
    assert r.json()["mfaPendingCredential"] and r.json()["mfaInfo"][0]["phoneInfo"] == "+*******0100"


def test_client_mfa_info_is_not_a_factor(spec):
    # A client cannot give itself factors at sign-up (they come from mfaEnrollment): the field is ignored.
    r = sign_up(spec, {"email": "carol@example.com", "password": "notasecret", "mfaInfo": [TEST_MFA_INFO]})
    assert r.status_code == 200, r.text
    assert "mfaInfo" not in spec.account_by_local_id(r.json()["localId"])


def test_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert has_error(sign_up(spec, {"tenantId": tenant["tenantId"]}), "PROJECT_DISABLED")


def test_password_sign_up_not_allowed(spec):
    tenant = spec.register_tenant(allowPasswordSignup=False)
    assert has_error(sign_up(spec, {"tenantId": tenant["tenantId"], "email": "me@example.com", "password": "notasecret"}), "OPERATION_NOT_ALLOWED")


def test_anonymous_user_disabled(spec):
    tenant = spec.register_tenant(enableAnonymousUser=False)
    assert has_error(sign_up(spec, {"tenantId": tenant["tenantId"], "returnSecureToken": True}), "ADMIN_ONLY_OPERATION")


def test_account_in_tenant(spec):
    tenant = spec.register_tenant(allowPasswordSignup=True)
    r = sign_up(spec, {"tenantId": tenant["tenantId"], "email": "alice@example.com", "password": "notasecret"})
    assert r.status_code == 200, r.text
    assert spec.account_by_local_id(r.json()["localId"], tenant["tenantId"])["tenantId"] == tenant["tenantId"]


# -- blocking functions -----------------------------------------------------------------------------------------------
def expect_modified(r, session=False):
    assert r.status_code == 200 and isinstance(r.json()["refreshToken"], str), r.text
    c = decode(r.json()["idToken"])
    assert c["firebase"]["sign_in_provider"] == "password" and c["firebase"]["identities"] == {"email": ["me@example.com"]}
    assert r.json()["displayName"] == DISPLAY_NAME
    expect_modified_claims(c, session)


def password_sign_up(spec):
    return sign_up(spec, {"email": "me@example.com", "password": "notasecret"})


(test_before_create_modifies_new_password_user, test_before_sign_in_modifies_new_password_user,
 test_before_sign_in_overwrites_before_create, test_before_create_disables_new_user) = blocking_sign_up_cases(password_sign_up, expect_modified)


def test_privileged_requests_skip_blocking_functions(spec, blocking):
    blocking.configure("beforeCreate", "beforeSignIn")
    blocking.answer("/beforeCreate", 400, {})
    blocking.answer("/beforeSignIn", 400, {})
    r = admin_sign_up(spec, {"phoneNumber": TEST_PHONE_NUMBER, "displayName": "Alice"})
    assert r.status_code == 200 and "idToken" not in r.json() and r.json()["displayName"] == "Alice", r.text
    assert blocking.calls == []
