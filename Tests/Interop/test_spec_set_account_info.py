"""firebase-tools setAccountInfo.spec.ts (accounts:update), as raw HTTP against the release binary. Lookups after a
change read by localId where the official spec reuses an ID token the change revoked here (production revokes older
tokens when the email or password changes)."""
import json

import pytest

from spec_support import (TEST_INVALID_PHONE_NUMBER, TEST_MFA_INFO, TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2, TEST_PHONE_NUMBER_3,
                          decode, err, fake_idp, legacy, sign_in_methods, sign_in_with_email_link, spec)  # noqa: F401


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()
    spec.s.delete(f"{spec.url}/emulator/v1/projects/example/oobCodes")




def update(spec, body, owner=False):
    return spec.itk("update", body, owner=owner)


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()



def test_display_name_and_photo(spec):
    id_token = spec.register_anon_user()["idToken"]
    j = ok(update(spec, {"idToken": id_token, "displayName": "Alice", "photoUrl": "http://localhost/alice.png"}))
    assert j["displayName"] == "Alice" and j["photoUrl"] == "http://localhost/alice.png"
    # The official emulator issues no tokens for a profile change; production's docs (and we) do with
    # returnSecureToken, which this request does not send.
    assert "idToken" not in j and "refreshToken" not in j
    j = ok(update(spec, {"idToken": id_token, "deleteAttribute": ["DISPLAY_NAME", "PHOTO_URL"]}))
    assert "displayName" not in j and "photoUrl" not in j


def test_password_change_issues_tokens(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    j = ok(update(spec, {"idToken": up["idToken"], "password": "notasecreteither"}))
    assert isinstance(j["refreshToken"], str)
    c = decode(j["idToken"])
    assert c["user_id"] == up["localId"] and c["firebase"]["sign_in_provider"] == "password"
    assert spec.sign_in_with_password("alice@example.com", "notasecreteither")["localId"] == up["localId"]


def test_password_provider_for_anonymous_user(spec):
    anon = spec.register_anon_user()
    j = ok(update(spec, {"idToken": anon["idToken"], "email": "alice@example.com", "password": "notasecreteither"}))
    c = decode(j["idToken"])
    assert c["user_id"] == anon["localId"] and c["firebase"]["sign_in_provider"] == "password" and isinstance(j["refreshToken"], str)
    assert spec.sign_in_with_password("alice@example.com", "notasecreteither")["localId"] == anon["localId"]
    assert sign_in_methods(spec, "alice@example.com") == ["password"]


def test_email_without_password_for_anonymous_user(spec):
    anon = spec.register_anon_user()
    j = ok(update(spec, {"idToken": anon["idToken"], "email": "alice@example.com"}))
    c = decode(j["idToken"])
    assert c["user_id"] == anon["localId"] and c["firebase"]["sign_in_provider"] == "anonymous"
    assert "password" not in sign_in_methods(spec, "alice@example.com")


def test_email_change_sends_recovery_code(spec, legacy):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    j = ok(update(spec, {"idToken": up["idToken"], "email": "bob@example.com"}))
    c = decode(j["idToken"])
    assert c["user_id"] == up["localId"] and c["email"] == "bob@example.com" and c["firebase"]["sign_in_provider"] == "password"
    assert spec.sign_in_with_password("bob@example.com", "notasecret")["localId"] == up["localId"]
    assert err(spec.itk("signInWithPassword", {"email": "alice@example.com", "password": "notasecret"})) == (400, "EMAIL_NOT_FOUND")
    oobs = spec.oobs()
    assert [(o["email"], o["requestType"]) for o in oobs] == [("alice@example.com", "RECOVER_EMAIL")]


def test_email_of_another_user(spec):
    spec.register_user(email="bob@example.com", password="notasecret")
    id_token = spec.register_anon_user()["idToken"]
    assert err(update(spec, {"idToken": id_token, "email": "bob@example.com"})) == (400, "EMAIL_EXISTS")
    assert err(update(spec, {"idToken": id_token, "email": "BOB@example.com", "password": "notasecret"})) == (400, "EMAIL_EXISTS")


def test_initial_email(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    assert ok(update(spec, {"idToken": up["idToken"], "email": "bob@example.com"}))["email"] == "bob@example.com"
    assert spec.account_by_local_id(up["localId"])["initialEmail"] == "alice@example.com"


def test_recover_email_code(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    ok(update(spec, {"idToken": up["idToken"], "email": "bob@example.com"}))
    oobs = spec.oobs()
    assert [(o["email"], o["requestType"]) for o in oobs] == [("alice@example.com", "RECOVER_EMAIL")]
    j = ok(update(spec, {"oobCode": oobs[0]["oobCode"]}))
    assert j["email"] == "alice@example.com" and j["emailVerified"] is True
    assert spec.oobs() == []


def test_recover_email_taken_meanwhile(spec):
    up = spec.register_user(email="bob@example.com", password="notasecret")
    assert ok(update(spec, {"idToken": up["idToken"], "email": "bob_new@example.com"}))["email"] == "bob_new@example.com"
    spec.register_user(email="bob@example.com", password="notasecreteither")
    oobs = spec.oobs()
    assert [o["requestType"] for o in oobs] == ["RECOVER_EMAIL"]
    assert err(update(spec, {"oobCode": oobs[0]["oobCode"]})) == (400, "EMAIL_EXISTS")


def test_anonymous_email_sets_no_initial_email(spec):
    anon = spec.register_anon_user()
    assert ok(update(spec, {"idToken": anon["idToken"], "email": "alice@example.com"}))["email"] == "alice@example.com"
    assert spec.oobs() == []
    assert "initialEmail" not in spec.account_by_local_id(anon["localId"])


def test_disabled_user_email(spec):
    up = spec.register_user(email="bob@example.com", password="notasecret")
    spec.update_account_by_local_id(up["localId"], disableUser=True)
    assert err(update(spec, {"idToken": up["idToken"], "email": "alice@example.com"})) == (400, "USER_DISABLED")


def test_verify_and_change_email(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    ok(spec.itk("sendOobCode", {"idToken": up["idToken"], "newEmail": "bob@example.com", "requestType": "VERIFY_AND_CHANGE_EMAIL"}))
    oobs = spec.oobs()
    assert [(o["email"], o.get("newEmail"), o["requestType"]) for o in oobs] == [("alice@example.com", "bob@example.com", "VERIFY_AND_CHANGE_EMAIL")]
    j = ok(update(spec, {"oobCode": oobs[0]["oobCode"]}))
    assert j["email"] == "bob@example.com" and j["newEmail"] == "bob@example.com" and j["emailVerified"] is True
    # The official emulator leaves the inbox empty; production (and we) mail the old address a RECOVER_EMAIL code
    # (docs/differences.md, "RECOVER_EMAIL after an email change").
    assert [(o["email"], o.get("newEmail"), o["requestType"]) for o in spec.oobs()] == [
        ("alice@example.com", "bob@example.com", "RECOVER_EMAIL")]


def test_verify_and_change_email_taken_meanwhile(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    ok(spec.itk("sendOobCode", {"idToken": up["idToken"], "newEmail": "bob@example.com", "requestType": "VERIFY_AND_CHANGE_EMAIL"}))
    oobs = spec.oobs()
    spec.register_user(email="bob@example.com", password="notasecreteither")
    assert err(update(spec, {"oobCode": oobs[0]["oobCode"]})) == (400, "EMAIL_EXISTS")
    assert spec.oobs() == []


def test_phone_number_changes(spec):
    phone = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    ok(update(spec, {"localId": phone["localId"], "phoneNumber": "+15555550123"}, owner=True))
    assert spec.account_by_local_id(phone["localId"])["phoneNumber"] == "+15555550123"
    ok(update(spec, {"localId": phone["localId"], "phoneNumber": "+15555550123"}, owner=True))
    assert spec.account_by_local_id(phone["localId"])["phoneNumber"] == "+15555550123"


def test_phone_number_of_another_user(spec):
    spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    local_id = spec.register_anon_user()["localId"]
    assert err(update(spec, {"localId": local_id, "phoneNumber": TEST_PHONE_NUMBER}, owner=True)) == (400, "PHONE_NUMBER_EXISTS")


def test_invalid_phone_number(spec):
    local_id = spec.register_anon_user()["localId"]
    assert err(update(spec, {"localId": local_id, "phoneNumber": "555-555-0100"}, owner=True)) == (400, "INVALID_PHONE_NUMBER : Invalid format.")


def mfa_user(spec, mfa_info=None, addr="bob@example.com"):
    body = {"email": addr, "password": "notasecret"}
    if mfa_info:
        body["mfaInfo"] = mfa_info
    return ok(spec.itk("signUp", body, owner=True))["localId"]


def factors(spec, local_id):
    return spec.account_by_local_id(local_id).get("mfaInfo")


def set_factors(spec, local_id, enrollments):
    return update(spec, {"localId": local_id, "mfa": {"enrollments": enrollments}}, owner=True)


def test_creates_mfa_info(spec):
    local_id = mfa_user(spec)
    ok(set_factors(spec, local_id, [{**TEST_MFA_INFO, "mfaEnrollmentId": "enrollmentId1"}]))
    (f,) = factors(spec, local_id)
    assert (f["displayName"], f["phoneInfo"], f["mfaEnrollmentId"]) == ("Cell Phone", TEST_PHONE_NUMBER, "enrollmentId1")


def test_adds_second_factor(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    (saved,) = factors(spec, local_id)
    second = {"displayName": "Second MFA Factor", "phoneInfo": TEST_PHONE_NUMBER_2, "mfaEnrollmentId": "enrollmentId2"}
    ok(set_factors(spec, local_id, [saved, second]))
    got = {f["mfaEnrollmentId"]: f for f in factors(spec, local_id)}
    assert len(got) == 2
    assert all(got[saved["mfaEnrollmentId"]].get(k) == v for k, v in saved.items() if k != "unobfuscatedPhoneInfo")
    assert all(got["enrollmentId2"][k] == v for k, v in second.items())


def test_changes_factor_phone_and_name(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    (saved,) = factors(spec, local_id)
    ok(set_factors(spec, local_id, [{**saved, "displayName": "New Display Name", "phoneInfo": "+15555550101"}]))
    (f,) = factors(spec, local_id)
    assert (f["displayName"], f["phoneInfo"], f["mfaEnrollmentId"]) == ("New Display Name", "+15555550101", saved["mfaEnrollmentId"])


def test_changes_enrollment_id(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    (saved,) = factors(spec, local_id)
    ok(set_factors(spec, local_id, [{**saved, "mfaEnrollmentId": "newEnrollmentId"}]))
    (f,) = factors(spec, local_id)
    assert (f["displayName"], f["phoneInfo"], f["mfaEnrollmentId"]) == (saved["displayName"], saved["phoneInfo"], "newEnrollmentId")


def test_overwrites_factors(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO, {**TEST_MFA_INFO, "phoneInfo": TEST_PHONE_NUMBER_3}])
    old = [f["mfaEnrollmentId"] for f in factors(spec, local_id)]
    assert len(old) == 2
    new = {"displayName": "New New", "phoneInfo": TEST_PHONE_NUMBER_3, "mfaEnrollmentId": "newEnrollmentId"}
    ok(set_factors(spec, local_id, [new]))
    (f,) = factors(spec, local_id)
    assert all(f[k] == v for k, v in new.items()) and f["mfaEnrollmentId"] not in old


@pytest.mark.parametrize("mfa", [{"enrollments": []}, {}])
def test_removes_factors(spec, mfa):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    ok(update(spec, {"localId": local_id, "mfa": mfa}, owner=True))
    assert factors(spec, local_id) is None


def test_enrollment_id_is_required(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    assert err(set_factors(spec, local_id, [TEST_MFA_INFO])) == (400, "INVALID_MFA_ENROLLMENT_ID : mfaEnrollmentId must be defined.")


def test_deduplicates_factors_by_number(spec):
    local_id = mfa_user(spec)
    ok(set_factors(spec, local_id, [{**TEST_MFA_INFO, "mfaEnrollmentId": "enrollmentId1"}] * 2))
    (f,) = factors(spec, local_id)
    assert f["phoneInfo"] == TEST_PHONE_NUMBER and f["displayName"] == "Cell Phone" and f["mfaEnrollmentId"] == "enrollmentId1"
    ok(set_factors(spec, local_id, []))
    assert factors(spec, local_id) is None
    ok(set_factors(spec, local_id, [{**TEST_MFA_INFO, "mfaEnrollmentId": f"enrollmentId{i}"} for i in (2, 3, 4)]))
    (f,) = factors(spec, local_id)
    assert f["phoneInfo"] == TEST_PHONE_NUMBER and f["mfaEnrollmentId"] != "enrollmentId1"
    ok(set_factors(spec, local_id, [{**TEST_MFA_INFO, "mfaEnrollmentId": f"enrollmentId{i}"} for i in (5, 6, 7)]
                   + [{"phoneInfo": TEST_PHONE_NUMBER_2, "mfaEnrollmentId": f"enrollmentId{i}"} for i in (8, 9)]))
    got = factors(spec, local_id)
    assert sorted(f["phoneInfo"] for f in got) == [TEST_PHONE_NUMBER, TEST_PHONE_NUMBER_2]
    assert all(f["mfaEnrollmentId"] and f["mfaEnrollmentId"] != "enrollmentId1" for f in got)


def test_duplicate_enrollment_id_for_different_numbers(spec):
    local_id = mfa_user(spec)
    r = set_factors(spec, local_id, [{**TEST_MFA_INFO, "mfaEnrollmentId": "duplicateMfaEnrollmentId "},
                                     {"phoneInfo": TEST_PHONE_NUMBER_2, "mfaEnrollmentId": "duplicateMfaEnrollmentId "}])
    assert err(r) == (400, "DUPLICATE_MFA_ENROLLMENT_ID")


def test_enrollment_ids_need_not_be_unique_across_users(spec):
    bob = mfa_user(spec, [TEST_MFA_INFO])
    alice = mfa_user(spec, [TEST_MFA_INFO], addr="alice@example.com")
    (bob_f,) = factors(spec, bob)
    alice_id = factors(spec, alice)[0]["mfaEnrollmentId"]
    ok(set_factors(spec, bob, [{**bob_f, "mfaEnrollmentId": alice_id}]))
    assert factors(spec, bob)[0]["mfaEnrollmentId"] == alice_id


def test_invalid_factor_number(spec):
    local_id = mfa_user(spec, [TEST_MFA_INFO])
    (f,) = factors(spec, local_id)
    without = {k: v for k, v in f.items() if k != "phoneInfo"}
    assert err(set_factors(spec, local_id, [without])) == (400, "INVALID_MFA_PHONE_NUMBER : Invalid format.")
    assert err(set_factors(spec, local_id, [{**f, "phoneInfo": TEST_INVALID_PHONE_NUMBER}])) == (400, "INVALID_MFA_PHONE_NUMBER : Invalid format.")


def test_mfa_update_of_unknown_user(spec):
    assert err(set_factors(spec, "anything", [{**TEST_MFA_INFO, "mfaEnrollmentId": "anything"}])) == (400, "USER_NOT_FOUND")


def test_enrollments_must_be_an_array(spec):
    assert err(set_factors(spec, "anything", None)) == (400, "Invalid JSON payload received. /mfa/enrollments must be array")


def test_disabled_user_by_id_token(spec):
    anon = spec.register_anon_user()
    spec.update_account_by_local_id(anon["localId"], disableUser=True)
    assert err(update(spec, {"idToken": anon["idToken"], "displayName": "Foo"})) == (400, "USER_DISABLED")


def test_admin_updates_disabled_user(spec):
    local_id = spec.register_anon_user()["localId"]
    spec.update_account_by_local_id(local_id, disableUser=True)
    spec.update_account_by_local_id(local_id, displayName="Foo")
    spec.update_account_by_local_id(local_id, disableUser=False)


def advance(spec, seconds):
    assert spec.s.post(f"{spec.url}/emulator/v1/clock:advance", json={"seconds": seconds}).status_code == 200


def test_valid_since_and_password_revoke_tokens(spec):
    up = spec.register_user(email="alice@example.com", password="notasecret")
    first = up["idToken"]
    advance(spec, 2)
    second = ok(update(spec, {"idToken": first, "password": "notasecreteither"}))["idToken"]
    assert err(spec.lookup(first)) == (400, "TOKEN_EXPIRED")
    spec.account_by_id_token(second)
    advance(spec, 2)
    # validSince is an admin field in production (a client's is ignored, and issues no tokens): the admin moves it.
    seconds = spec.s.get(f"{spec.url}/emulator/v1/clock").json()["nowMillis"] // 1000
    ok(update(spec, {"localId": up["localId"], "validSince": str(seconds)}, owner=True))
    assert err(spec.lookup(first)) == (400, "TOKEN_EXPIRED") and err(spec.lookup(second)) == (400, "TOKEN_EXPIRED")
    advance(spec, 1)
    spec.account_by_id_token(spec.sign_in_with_password("alice@example.com", "notasecreteither")["idToken"])



@pytest.mark.parametrize("provider", ["password", "phone", "google.com"])
def test_deletes_provider(spec, provider):
    if provider == "password":
        user = {**spec.register_user(email="alice@example.com", password="notasecret"), "email": "alice@example.com"}
    elif provider == "phone":
        user = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    else:
        user = {**fake_idp(spec, "12345", "bob@example.com"), "email": "bob@example.com"}
    j = ok(update(spec, {"idToken": user["idToken"], "deleteProvider": [provider]}))
    assert provider not in [p["providerId"] for p in j.get("providerUserInfo", [])]
    if user.get("email"):
        m = sign_in_methods(spec, user["email"])
        assert provider not in m and "emailLink" not in m


def test_admin_updates_by_local_id(spec):
    local_id = spec.register_user(email="foo@example.com", password="barbaz")["localId"]
    j = ok(update(spec, {"localId": local_id, "phoneNumber": TEST_PHONE_NUMBER, "displayName": "Alice",
                         "photoUrl": "http://localhost/alice.png", "emailVerified": True}, owner=True))
    assert j["displayName"] == "Alice" and j["photoUrl"] == "http://localhost/alice.png" and j["emailVerified"] is True


def test_admin_without_local_id(spec):
    assert err(update(spec, {"emailVerified": True}, owner=True)) == (400, "MISSING_LOCAL_ID")


def test_custom_attributes_reach_id_tokens(spec):
    up = spec.register_user(email="foo@example.com", password="barbaz")
    ok(update(spec, {"localId": up["localId"], "customAttributes": json.dumps({"foo": "bar", "baz": {"answer": 42}})}, owner=True))
    c = decode(sign_in_with_email_link(spec, "foo@example.com")["idToken"])
    assert c["foo"] == "bar" and c["baz"] == {"answer": 42}


@pytest.mark.parametrize("attrs, code", [("{definitely[not]json}", "INVALID_CLAIMS"), ("42", "INVALID_CLAIMS"), ('["a", "b"]', "INVALID_CLAIMS"),
                                         ('{"sub": "12345"}', "FORBIDDEN_CLAIM : sub"), ('{"a":"' + "x" * 998 + '"}', "CLAIMS_TOO_LARGE")])
def test_invalid_custom_attributes(spec, attrs, code):
    local_id = spec.register_user(email="foo@example.com", password="barbaz")["localId"]
    assert err(update(spec, {"localId": local_id, "customAttributes": attrs}, owner=True)) == (400, code)


def test_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(update(spec, {"tenantId": tenant["tenantId"]})) == (400, "PROJECT_DISABLED")


def test_tenant_in_oob_link(spec):
    tenant = spec.register_tenant(disableAuth=False, allowPasswordSignup=True, mfaConfig={"state": "ENABLED"})
    tid = tenant["tenantId"]
    up = spec.register_user(email="alice@example.com", password="notasecret", tenantId=tid)
    ok(update(spec, {"idToken": up["idToken"], "email": "bob@example.com", "tenantId": tid}))
    oobs = spec.oobs(tid)
    assert [(o["email"], o["requestType"]) for o in oobs] == [("alice@example.com", "RECOVER_EMAIL")] and tid in oobs[0]["oobLink"]


LINKED = {"providerId": "google.com", "rawId": "google_user_id", "email": "linked@example.com", "displayName": "Linked User",
          "photoUrl": "https://example.com/photo.jpg"}


def test_links_provider_account(spec):
    # linkProviderUserInfo needs an admin's credential in production (a client linking someone else's identity would
    # receive their sign-ins): the official spec's client call is refused, the admin's links.
    up = spec.register_user(email="test@example.com", password="password")
    assert err(update(spec, {"idToken": up["idToken"], "linkProviderUserInfo": LINKED})) == (400, "INSUFFICIENT_PERMISSION")
    j = ok(update(spec, {"localId": up["localId"], "linkProviderUserInfo": LINKED}, owner=True))
    assert len(j["providerUserInfo"]) == 2
    assert [p for p in j["providerUserInfo"] if p["providerId"] == "google.com"] == [LINKED]
    info = spec.account_by_local_id(up["localId"])
    assert [p for p in info["providerUserInfo"] if p["providerId"] == "google.com"] == [LINKED]


def test_link_provider_missing_fields(spec):
    local_id = spec.register_user(email="test@example.com", password="password")["localId"]
    r = update(spec, {"localId": local_id, "linkProviderUserInfo": {"providerId": "google.com", "email": "linked@example.com"}}, owner=True)
    assert "MISSING_RAW_ID" in err(r)[1]
    r = update(spec, {"localId": local_id, "linkProviderUserInfo": {"rawId": "google_user_id", "email": "linked@example.com"}}, owner=True)
    assert "MISSING_PROVIDER_ID" in err(r)[1]


def test_link_provider_to_disabled_user(spec):
    up = spec.register_user(email="test@example.com", password="password")
    spec.update_account_by_local_id(up["localId"], disableUser=True)
    r = update(spec, {"idToken": up["idToken"], "linkProviderUserInfo": {"providerId": "google.com", "rawId": "google_user_id", "email": "linked@example.com"}})
    assert err(r) == (400, "USER_DISABLED")
