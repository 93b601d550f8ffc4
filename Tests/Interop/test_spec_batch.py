"""firebase-tools batch.spec.ts (accounts:batchGet, batchCreate, batchDelete, and the v3 downloadAccount /
uploadAccount), as raw HTTP against the release binary."""
import json

import pytest

from spec_support import PROJECT_ID, TEST_PHONE_NUMBER, V3, decode, err, fake_idp, has_error, sign_in_methods, sign_in_with_email_link, spec  # noqa: F401

OWNER = {"Authorization": "Bearer owner"}
BASE = f"/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}"


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()


def batch_get(spec, tenant=None, **params):
    path = BASE + (f"/tenants/{tenant}" if tenant else "") + "/accounts:batchGet"
    return spec.s.get(spec.url + path, params=params, headers=OWNER)


def batch_create(spec, body):
    return spec.s.post(f"{spec.url}{BASE}/accounts:batchCreate", json=body, headers=OWNER)


def batch_delete(spec, body):
    return spec.s.post(f"{spec.url}{BASE}/accounts:batchDelete", json=body, headers=OWNER)


def created(r):
    assert r.status_code == 200 and not r.json().get("error"), r.text
    return r.json()


def two_users(spec):
    return spec.register_anon_user(), spec.register_user(email="foo@example.com", password="foobar")


def test_lists_all_accounts(spec):
    a, b = two_users(spec)
    r = batch_get(spec)
    assert r.status_code == 200 and sorted(u["localId"] for u in r.json()["users"]) == sorted([a["localId"], b["localId"]])
    assert "nextPageToken" not in r.json()


def test_returns_mfa_info(spec):
    user = sign_in_with_email_link(spec, "test@example.com")
    spec.enroll_phone_mfa(user["idToken"], TEST_PHONE_NUMBER)
    users = batch_get(spec).json()["users"]
    assert len(users) == 1
    f = users[0]["mfaInfo"][0]
    # enrolledAt: the emulator clock's time of the enrollment (the official spec's clock is frozen at 0).
    assert f["phoneInfo"] == TEST_PHONE_NUMBER and f["unobfuscatedPhoneInfo"] == TEST_PHONE_NUMBER and f["enrolledAt"].endswith("Z")


def test_lists_all_accounts_with_legacy_endpoint(spec):
    a, b = two_users(spec)
    r = spec.s.post(f"{spec.url}{V3}/downloadAccount", json={"targetProjectId": PROJECT_ID}, headers=OWNER)
    assert r.status_code == 200, r.text
    assert sorted(u["localId"] for u in r.json()["users"]) == sorted([a["localId"], b["localId"]]) and "nextPageToken" not in r.json()


def test_max_results_and_pages(spec):
    ids = sorted(u["localId"] for u in two_users(spec))
    first = batch_get(spec, maxResults=1).json()
    assert [u["localId"] for u in first["users"]] == ids[:1] and isinstance(first["nextPageToken"], str)
    second = batch_get(spec, nextPageToken=first["nextPageToken"]).json()
    assert [u["localId"] for u in second["users"]] == ids[1:] and "nextPageToken" not in second


def test_legacy_download_takes_the_page_token(spec):
    ids = sorted(u["localId"] for u in two_users(spec))
    first = batch_get(spec, maxResults=1).json()
    legacy = spec.s.post(f"{spec.url}{V3}/downloadAccount", json={"targetProjectId": PROJECT_ID, "nextPageToken": first["nextPageToken"]},
                         headers=OWNER).json()
    assert [u["localId"] for u in legacy["users"]] == ids[1:] and "nextPageToken" not in legacy


def test_full_page(spec):
    ids = sorted(u["localId"] for u in two_users(spec))
    full = batch_get(spec, maxResults=2).json()
    assert [u["localId"] for u in full["users"]] == ids
    # Production hands out a token for a full page (firebase-tools#3231); its page is then empty.
    assert isinstance(full["nextPageToken"], str)
    rest = batch_get(spec, nextPageToken=full["nextPageToken"]).json()
    assert rest.get("users", []) == [] and "nextPageToken" not in rest


def test_batch_get_in_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert has_error(batch_get(spec, tenant=tenant["tenantId"]), "PROJECT_DISABLED")



def test_creates_accounts(spec):
    created(batch_create(spec, {"users": [{"localId": "foo", "email": "foo@example.com", "rawPassword": "notasecret"},
                                          {"localId": "bar", "phoneNumber": TEST_PHONE_NUMBER, "customAttributes": '{"hello": "world"}'}]}))
    assert sign_in_methods(spec, "foo@example.com") == ["password"]
    signed = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    assert signed["localId"] == "bar" and decode(signed["idToken"])["hello"] == "world"


def test_creates_accounts_with_legacy_endpoint(spec):
    r = spec.s.post(f"{spec.url}{V3}/uploadAccount", headers=OWNER, json={
        "users": [{"localId": "foo", "email": "foo@example.com", "rawPassword": "notasecret"}, {"localId": "bar", "phoneNumber": TEST_PHONE_NUMBER}],
        "targetProjectId": PROJECT_ID})
    created(r)
    assert sign_in_methods(spec, "foo@example.com") == ["password"]
    assert spec.sign_in_with_phone(TEST_PHONE_NUMBER)["localId"] == "bar"


def test_empty_or_missing_users(spec):
    assert err(batch_create(spec, {"users": []})) == (400, "MISSING_USER_ACCOUNT")
    assert err(batch_create(spec, {})) == (400, "MISSING_USER_ACCOUNT")


def test_emails_are_lowercased(spec):
    created(batch_create(spec, {"users": [{"localId": "foo", "email": "FOO@EXAMPLE.COM", "rawPassword": "notasecret"}]}))
    assert spec.account_by_local_id("foo")["email"] == "foo@example.com"


def test_official_fake_password_hash(spec):
    created(batch_create(spec, {"users": [{"localId": "foo", "email": "FOO@EXAMPLE.COM", "salt": "beach",
                                           "passwordHash": "fakeHash:salt=beach:password=hawaii"}]}))
    # The official emulator's clear-text "hash" is re-hashed here (docs/differences.md): it signs in, and is never echoed.
    info = spec.account_by_local_id("foo")
    assert "hawaii" not in json.dumps(info)
    assert spec.sign_in_with_password("foo@example.com", "hawaii")["localId"] == "foo"


def test_duplicate_email_in_payload(spec):
    r = batch_create(spec, {"sanityCheck": True, "users": [{"localId": "test1", "email": "foo@example.com"}, {"localId": "test2", "email": "foo@example.com"}]})
    assert err(r) == (400, "DUPLICATE_EMAIL : foo@example.com")


def test_existing_email_with_sanity_check(spec):
    user = sign_in_with_email_link(spec, "bar@example.com")
    r = batch_create(spec, {"sanityCheck": True, "users": [{"localId": "test1", "email": user["email"]}]})
    assert r.status_code == 200 and r.json()["error"] == [{"index": 0, "message": "email exists in other account in database"}]


def test_duplicate_raw_id_in_payload(spec):
    users = [{"localId": f"test{i}", "providerUserInfo": [{"providerId": "google.com", "rawId": "dup"}]} for i in (1, 2)]
    assert err(batch_create(spec, {"sanityCheck": True, "users": users})) == (400, "DUPLICATE_RAW_ID : Provider id(google.com), Raw id(dup)")



def test_existing_raw_id_with_sanity_check(spec):
    fake_idp(spec, "0123456")
    r = batch_create(spec, {"sanityCheck": True, "users": [{"localId": "test1", "providerUserInfo": [{"providerId": "google.com", "rawId": "0123456"}]}]})
    assert r.status_code == 200 and r.json()["error"] == [{"index": 0, "message": "raw id exists in other account in database"}]


def test_duplicate_local_ids(spec):
    assert err(batch_create(spec, {"users": [{"localId": "test1"}, {"localId": "test1"}]})) == (400, "DUPLICATE_LOCAL_ID : test1")
    local_id = spec.register_anon_user()["localId"]
    r = batch_create(spec, {"users": [{"localId": local_id}]})
    assert r.status_code == 200 and r.json()["error"] == [{"index": 0, "message": "localId belongs to an existing account - can not overwrite."}]


def test_empty_mfa_info(spec):
    created(batch_create(spec, {"users": [{"localId": "test1", "mfaInfo": []}]}))


def test_errors_for_individual_entries(spec):
    long = "x" * 998
    r = batch_create(spec, {"users": [
        {"email": "foo@example.com"}, {"localId": "test1"}, {"localId": "test2", "email": "not#an$email"},
        {"localId": "test3", "phoneNumber": "not#a$phone%number"}, {"localId": "test4", "customAttributes": "not#a$json%object"},
        {"localId": "test5", "customAttributes": '{"sub": "123"}'}, {"localId": "test6", "customAttributes": f'{{"a":"{long}"}}'},
        {"localId": "test7", "providerUserInfo": [{"providerId": "google.com"}]},
        {"localId": "test8", "providerUserInfo": [{"rawId": "012345"}]},
        {"localId": "test9", "providerUserInfo": [{"federatedId": "foo-bar"}]},
        {"localId": "test10", "mfaInfo": [{"phoneInfo": TEST_PHONE_NUMBER}]},
        {"localId": "test11", "email": "someone@example.com", "mfaInfo": [{"phoneInfo": TEST_PHONE_NUMBER}]}]})
    assert r.status_code == 200, r.text
    errors = {e["index"]: e["message"] for e in r.json()["error"]}
    assert errors == {
        0: "localId is missing", 2: "email is invalid", 3: "phone number format is invalid", 4: "Invalid custom claims provided.",
        5: "Custom claims provided include a reserved claim.", 6: "Custom claims provided are too large.",
        7: "federatedId or (providerId & rawId) is required", 8: "federatedId or (providerId & rawId) is required",
        9: errors.get(9), 10: "Second factor account requires email to be presented.", 11: "Second factor account requires email to be verified.",
    }
    # A federatedId alone: the official emulator cannot parse it either; the message is ours.
    assert 9 in errors


def test_allow_overwrite(spec):
    first = fake_idp(spec, "doh")
    second = spec.register_user(email="bar@example.com", password="hawaii", displayName="Old Display Name")
    created(batch_create(spec, {"allowOverwrite": True, "users": [
        {"localId": first["localId"], "email": "foo@example.com", "rawPassword": "notasecret"},
        {"localId": second["localId"], "phoneNumber": TEST_PHONE_NUMBER, "displayName": "New Display Name"}]}))
    info = spec.account_by_local_id(first["localId"])
    assert info["email"] == "foo@example.com"
    assert info["providerUserInfo"] == [{"providerId": "password", "rawId": "foo@example.com", "email": "foo@example.com",
                                         "federatedId": "foo@example.com"}]
    signed = spec.sign_in_with_phone(TEST_PHONE_NUMBER)
    assert signed["localId"] == second["localId"]
    info = spec.account_by_id_token(signed["idToken"])
    assert not info.get("email") and not info.get("passwordHash") and info["displayName"] == "New Display Name"


def test_imports_idp_info(spec):
    created(batch_create(spec, {"users": [{"localId": "foo", "email": "foo@example.com",
                                           "providerUserInfo": [{"providerId": "google.com", "rawId": "0123456", "displayName": "Foo", "email": "foo@example.com"}]}]}))
    assert sign_in_methods(spec, "foo@example.com") == ["google.com"]
    assert fake_idp(spec, "0123456")["localId"] == "foo"


def test_imports_mfa_info(spec):
    created(batch_create(spec, {"users": [{"localId": "foo", "email": "foo@example.com", "emailVerified": True,
                                           "mfaInfo": [{"enrolledAt": "2123-04-05T06:07:28.990Z", "phoneInfo": TEST_PHONE_NUMBER}]}]}))
    f = spec.account_by_local_id("foo")["mfaInfo"]
    assert len(f) == 1 and f[0]["enrolledAt"] == "2123-04-05T06:07:28.990Z" and f[0]["phoneInfo"] == TEST_PHONE_NUMBER
    assert f[0]["unobfuscatedPhoneInfo"] == TEST_PHONE_NUMBER and f[0]["mfaEnrollmentId"]


def test_batch_create_in_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert has_error(batch_create(spec, {"tenantId": tenant["tenantId"]}), "PROJECT_DISABLED")


def test_user_tenant_id_mismatch(spec):
    tenant = spec.register_tenant(disableAuth=False)
    r = batch_create(spec, {"tenantId": tenant["tenantId"], "users": [{"localId": "test1", "tenantId": "not-matching-tenant-id"}]})
    assert r.status_code == 200 and r.json()["error"] == [{"index": 0, "message": "Tenant id in userInfo does not match the tenant id in request."}]


def test_creates_users_in_tenant(spec):
    tenant = spec.register_tenant(disableAuth=False)
    created(batch_create(spec, {"tenantId": tenant["tenantId"], "users": [{"localId": "foo", "email": "me@example.com", "rawPassword": "notasecret"}]}))
    assert spec.account_by_local_id("foo", tenant["tenantId"])["tenantId"] == tenant["tenantId"]


def two_disabled(spec, disable_first=True):
    a, b = two_users(spec)
    if disable_first:
        spec.update_account_by_local_id(a["localId"], disableUser=True)
    spec.update_account_by_local_id(b["localId"], disableUser=True)
    return a["localId"], b["localId"]


def test_deletes_disabled_accounts(spec):
    ids = two_disabled(spec)
    r = batch_delete(spec, {"localIds": list(ids)})
    assert r.status_code == 200 and not r.json().get("errors"), r.text


def test_accounts_not_disabled(spec):
    a, b = two_disabled(spec, disable_first=False)
    r = batch_delete(spec, {"localIds": [a, b]})
    assert r.status_code == 200 and r.json()["errors"] == [{"index": 0, "localId": a, "message": "NOT_DISABLED : Disable the account before batch deletion."}]


def test_force_deletes_all(spec):
    ids = two_disabled(spec, disable_first=False)
    r = batch_delete(spec, {"localIds": list(ids), "force": True})
    assert r.status_code == 200 and not r.json().get("errors"), r.text


def test_nonexistent_local_ids(spec):
    for force in (False, True):
        r = batch_delete(spec, {"localIds": ["nosuch", "nosuch2"], "force": force})
        assert r.status_code == 200 and not r.json().get("errors"), r.text


def test_empty_local_ids(spec):
    assert err(batch_delete(spec, {"localIds": [], "force": True})) == (400, "LOCAL_ID_LIST_EXCEEDS_LIMIT")


def test_local_id_limit(spec):
    ids = [f"localId-{i}" for i in range(1000)]
    r = batch_delete(spec, {"localIds": ids, "force": True})
    assert r.status_code == 200 and not r.json().get("errors"), r.text
    assert err(batch_delete(spec, {"localIds": ids + ["extraOne"], "force": True})) == (400, "LOCAL_ID_LIST_EXCEEDS_LIMIT")
