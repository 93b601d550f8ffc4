"""firebase-tools misc.spec.ts (token refresh, createSessionCookie, accounts:lookup, accounts:query, the emulator's
own config and accounts API), as raw HTTP against the release binary. Refresh tokens here are opaque and stored
server-side (production's design), so the official cases that forge an encoded refresh-token record are covered by
what such a forged token gets: INVALID_REFRESH_TOKEN."""
import base64
import json

import pytest

from spec_support import PROJECT_ID, TEST_PHONE_NUMBER, decode, err, spec  # noqa: F401

TOKEN = "/securetoken.googleapis.com/v1/token"
OWNER = {"Authorization": "Bearer owner"}


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()


def refresh(spec, **form):
    return spec.s.post(spec.url + TOKEN, params={"key": "fake-api-key"}, data=form)


def expect_refreshed(r, local_id):
    assert r.status_code == 200, r.text
    j = r.json()
    assert isinstance(j["id_token"], str) and j["access_token"] == j["id_token"] and isinstance(j["refresh_token"], str)
    assert j["expires_in"].isdigit() and j["token_type"] == "Bearer" and j["user_id"] == local_id
    assert isinstance(j["project_id"], str) and j["project_id"]


def test_exchanges_refresh_token(spec):
    anon = spec.register_anon_user()
    expect_refreshed(refresh(spec, refresh_token=anon["refreshToken"], grantType="refresh_token"), anon["localId"])


def test_exchanges_refresh_token_in_tenant(spec):
    tenant = spec.register_tenant(disableAuth=False, allowPasswordSignup=True)
    up = spec.register_user(email="alice@example.com", password="notasecret", tenantId=tenant["tenantId"])
    r = refresh(spec, refresh_token=up["refreshToken"], grantType="refresh_token")
    expect_refreshed(r, up["localId"])
    assert decode(r.json()["id_token"])["firebase"]["tenant"] == tenant["tenantId"]


def test_auth_time_is_last_login(spec):
    spec.s.post(f"{spec.url}/emulator/v1/clock:advance", json={"seconds": 0.444})
    up = spec.register_user(email="alice@example.com", password="notasecret")
    spec.s.post(f"{spec.url}/emulator/v1/clock:advance", json={"seconds": 2})
    id_token = refresh(spec, refresh_token=up["refreshToken"], grantType="refresh_token").json()["id_token"]
    user = spec.account_by_id_token(id_token)
    assert decode(id_token)["auth_time"] == int(user["lastLoginAt"]) // 1000


def test_missing_grant_type(spec):
    status, message = err(refresh(spec, refresh_token=spec.register_anon_user()["refreshToken"]))
    assert status == 400 and "MISSING_GRANT_TYPE" in message


def test_other_grant_type(spec):
    status, message = err(refresh(spec, refresh_token=spec.register_anon_user()["refreshToken"], grantType="other_grant_type"))
    assert status == 400 and "INVALID_GRANT_TYPE" in message


def test_missing_refresh_token(spec):
    status, message = err(refresh(spec, grantType="refresh_token"))
    assert status == 400 and "MISSING_REFRESH_TOKEN" in message


def test_malformed_refresh_token(spec):
    status, message = err(refresh(spec, refresh_token="malformedToken", grantType="refresh_token"))
    assert status == 400 and "INVALID_REFRESH_TOKEN" in message


def test_disabled_user(spec):
    anon = spec.register_anon_user()
    spec.update_account_by_local_id(anon["localId"], disableUser=True)
    assert err(refresh(spec, refreshToken=anon["refreshToken"], grantType="refresh_token")) == (400, "USER_DISABLED")


@pytest.mark.parametrize("record", [
    {"_AuthEmulatorRefreshToken": "DO NOT MODIFY", "localId": "localId", "provider": "provider", "extraClaims": {}, "projectId": "notMatchingProjectId"},
    {"localId": "localId", "provider": "provider", "extraClaims": {}, "projectId": "notMatchingProjectId"},
])
def test_forged_refresh_token_records(spec, record):
    forged = base64.b64encode(json.dumps(record).encode()).decode()
    assert err(refresh(spec, refresh_token=forged, grantType="refresh_token")) == (400, "INVALID_REFRESH_TOKEN")


def test_refresh_token_of_deleted_user(spec):
    anon = spec.register_anon_user()
    assert spec.itk("delete", {"idToken": anon["idToken"]}).status_code == 200
    # The user's refresh tokens went with it.
    assert err(refresh(spec, refresh_token=anon["refreshToken"], grantType="refresh_token")) == (400, "INVALID_REFRESH_TOKEN")


COOKIE = f"/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}:createSessionCookie"


def cookie(spec, body):
    return spec.s.post(spec.url + COOKIE, json=body, headers=OWNER)


def now(spec):
    return spec.s.get(f"{spec.url}/emulator/v1/clock").json()


def test_valid_session_cookie(spec):
    id_token = spec.register_anon_user()["idToken"]
    r = cookie(spec, {"idToken": id_token, "validDuration": "7777"})
    assert r.status_code == 200, r.text
    c = decode(r.json()["sessionCookie"])
    assert c["exp"] - c["iat"] == 7777 and c["iss"] == f"https://session.firebase.google.com/{PROJECT_ID}"
    props = {k: v for k, v in decode(id_token).items() if k not in ("iss", "iat", "exp")}
    assert all(c[k] == v for k, v in props.items()), (c, props)


def test_session_cookie_without_id_token(spec):
    assert err(cookie(spec, {"validDuration": "7777"})) == (400, "MISSING_ID_TOKEN")


def test_session_cookie_of_invalid_id_token(spec):
    assert err(cookie(spec, {"idToken": "invalid", "validDuration": "7777"})) == (400, "INVALID_ID_TOKEN")


def test_session_cookie_default_duration(spec):
    r = cookie(spec, {"idToken": spec.register_anon_user()["idToken"]})
    c = decode(r.json()["sessionCookie"])
    assert c["exp"] - c["iat"] == 14 * 24 * 3600


@pytest.mark.parametrize("duration", ["1", "999999999999"])
def test_session_cookie_duration_bounds(spec, duration):
    assert err(cookie(spec, {"idToken": spec.register_anon_user()["idToken"], "validDuration": duration})) == (400, "INVALID_DURATION")


LOOKUP = f"/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}/accounts:lookup"


def admin_lookup(spec, body):
    r = spec.s.post(spec.url + LOOKUP, json=body, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()


def test_lookup_by_email(spec):
    spec.register_user(email="bob@example.com", password="password")
    assert [u["email"] for u in admin_lookup(spec, {"email": ["bob@example.com"]})["users"]] == ["bob@example.com"]
    assert [u["email"] for u in admin_lookup(spec, {"email": ["BOB@EXAMPLE.COM"]})["users"]] == ["bob@example.com"]
    assert "users" not in admin_lookup(spec, {"email": ["non-existent-email@example.com"]})


def test_lookup_by_local_id_deduplicates(spec):
    local_id = spec.register_anon_user()["localId"]
    assert [u["localId"] for u in admin_lookup(spec, {"localId": [local_id]})["users"]] == [local_id]
    assert [u["localId"] for u in admin_lookup(spec, {"localId": [local_id, local_id]})["users"]] == [local_id]
    assert "users" not in admin_lookup(spec, {"localId": ["noSuchId"]})


def test_lookup_phone_user_provider_info(spec):
    local_id = spec.sign_in_with_phone(TEST_PHONE_NUMBER)["localId"]
    assert admin_lookup(spec, {"localId": [local_id]})["users"][0]["providerUserInfo"] == \
        [{"phoneNumber": TEST_PHONE_NUMBER, "rawId": TEST_PHONE_NUMBER, "providerId": "phone"}]


def test_lookup_by_tenant_id_token(spec):
    tenant = spec.register_tenant(disableAuth=False, allowPasswordSignup=True)
    up = spec.register_user(email="alice@example.com", password="notasecret", tenantId=tenant["tenantId"])
    r = spec.itk("lookup", {"idToken": up["idToken"]})
    assert r.status_code == 200 and [u["localId"] for u in r.json()["users"]] == [up["localId"]]


def test_lookup_in_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    status, message = err(spec.itk("lookup", {"tenantId": tenant["tenantId"]}, owner=True))
    assert status == 400 and "PROJECT_DISABLED" in message


QUERY = f"/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}/accounts:query"


def test_query_count_only(spec):
    spec.register_anon_user()
    spec.register_anon_user()
    r = spec.s.post(spec.url + QUERY, json={"returnUserInfo": False}, headers=OWNER)
    assert r.status_code == 200 and r.json()["recordsCount"] == "2" and "userInfo" not in r.json(), r.text


def test_query_users(spec):
    anon = spec.register_anon_user()["localId"]
    user = spec.register_user(email="alice@example.com", password="notasecret")["localId"]
    r = spec.s.post(spec.url + QUERY, json={}, headers=OWNER)
    assert r.status_code == 200 and r.json()["recordsCount"] == "2", r.text
    users = r.json()["userInfo"]
    assert len(users) == 2 and users[0]["localId"] < users[1]["localId"]
    assert {u["localId"] for u in users} == {anon, user}
    assert [u["email"] for u in users if u["localId"] == user] == ["alice@example.com"]


def test_query_in_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(spec.s.post(spec.url + QUERY, json={"tenantId": tenant["tenantId"]}, headers=OWNER)) == (400, "PROJECT_DISABLED")


def test_drop_all_accounts(spec):
    a = spec.register_user(email="alice@example.com", password="notasecret")
    b = spec.register_user(email="bob@example.com", password="notasecret2")
    assert spec.s.delete(f"{spec.url}/emulator/v1/projects/{PROJECT_ID}/accounts").status_code == 200
    spec.expect_user_not_exists(a["idToken"])
    spec.expect_user_not_exists(b["idToken"])


def test_drop_all_accounts_of_tenant(spec):
    tenant = spec.register_tenant(disableAuth=False, allowPasswordSignup=True)
    tid = tenant["tenantId"]
    a = spec.register_user(email="alice@example.com", password="notasecret", tenantId=tid)
    b = spec.register_user(email="bob@example.com", password="notasecret2", tenantId=tid)
    assert spec.s.delete(f"{spec.url}/emulator/v1/projects/{PROJECT_ID}/tenants/{tid}/accounts").status_code == 200
    spec.expect_user_not_exists(a["idToken"], tid)
    spec.expect_user_not_exists(b["idToken"], tid)


def emu_config(spec, body=None, project=PROJECT_ID):
    path = f"{spec.url}/emulator/v1/projects/{project}/config"
    r = spec.s.patch(path, json=body) if body is not None else spec.s.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def test_emulator_config(spec):
    c = emu_config(spec)
    assert c["signIn"]["allowDuplicateEmails"] is False
    # Production's default for new projects (the official emulator's is false).
    assert c["emailPrivacyConfig"] == {"enableImprovedEmailPrivacy": True}
    assert spec.s.get(f"{spec.url}/emulator/v1/projects/someproject/config").status_code == 200


def test_emulator_config_patches_each_field_alone(spec):
    for dup, private in [(True, True), (False, True)]:
        c = emu_config(spec, {"signIn": {"allowDuplicateEmails": dup}})
        assert c["signIn"]["allowDuplicateEmails"] is dup and c["emailPrivacyConfig"] == {"enableImprovedEmailPrivacy": private}
    for private in [False, True]:
        c = emu_config(spec, {"emailPrivacyConfig": {"enableImprovedEmailPrivacy": private}})
        assert c["signIn"]["allowDuplicateEmails"] is False and c["emailPrivacyConfig"] == {"enableImprovedEmailPrivacy": private}
    for both in [True, False]:
        c = emu_config(spec, {"signIn": {"allowDuplicateEmails": both}, "emailPrivacyConfig": {"enableImprovedEmailPrivacy": both}})
        assert c["signIn"]["allowDuplicateEmails"] is both and c["emailPrivacyConfig"] == {"enableImprovedEmailPrivacy": both}
    emu_config(spec, {"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}})
