"""Issue 3: firebase-admin (Python, emulator mode) against the running binary, unmodified; client account calls."""
import json
import time

import pytest
import requests
from firebase_admin import auth, tenant_mgt

from conftest import FICTIONAL, claims_of, credentialed_app, error_message


def phone_sign_in(emu, phone, tenant=None, id_token=None):
    body = {"phoneNumber": phone}
    if tenant:
        body["tenantId"] = tenant
    session = emu.itk("sendVerificationCode", body).json()["sessionInfo"]
    codes_url = f"{emu.url}/emulator/v1/projects/demo-phone" + (f"/tenants/{tenant}" if tenant else "") + "/verificationCodes"
    code = [c for c in requests.get(codes_url).json()["verificationCodes"] if c["sessionInfo"] == session][0]["code"]
    req = {"sessionInfo": session, "code": code}
    if tenant:
        req["tenantId"] = tenant
    if id_token:
        req["idToken"] = id_token
    r = emu.itk("signInWithPhoneNumber", req)
    assert r.status_code == 200, r.text
    return r.json()


def test_create_get_update_delete(admin):
    emu, app = admin
    u = auth.create_user(phone_number="+15551110001", display_name="Ada", photo_url="https://example.com/a.png", app=app)
    assert u.phone_number == "+15551110001" and u.display_name == "Ada" and not u.disabled
    assert u.user_metadata.creation_timestamp > 0
    assert auth.get_user(u.uid, app=app).uid == u.uid
    assert auth.get_user_by_phone_number("+15551110001", app=app).uid == u.uid
    with pytest.raises(auth.PhoneNumberAlreadyExistsError):
        auth.create_user(phone_number="+15551110001", app=app)
    with pytest.raises(auth.UidAlreadyExistsError):
        auth.create_user(uid=u.uid, app=app)
    custom = auth.create_user(uid="my-own-uid", phone_number="+15551110002", app=app)
    assert custom.uid == "my-own-uid"

    u2 = auth.update_user(u.uid, display_name="Ada L.", phone_number="+15551110003", email="ada@example.com", app=app)
    assert u2.display_name == "Ada L." and u2.phone_number == "+15551110003" and u2.email == "ada@example.com"
    with pytest.raises(auth.PhoneNumberAlreadyExistsError):
        auth.update_user(u.uid, phone_number="+15551110002", app=app)
    u3 = auth.update_user(u.uid, display_name=auth.DELETE_ATTRIBUTE, photo_url=auth.DELETE_ATTRIBUTE, phone_number=auth.DELETE_ATTRIBUTE, app=app)
    assert u3.display_name is None and u3.photo_url is None and u3.phone_number is None
    # The freed number can be used by someone else.
    assert auth.update_user("my-own-uid", phone_number="+15551110003", app=app).phone_number == "+15551110003"

    auth.delete_user(u.uid, app=app)
    with pytest.raises(auth.UserNotFoundError):
        auth.get_user(u.uid, app=app)
    with pytest.raises(auth.UserNotFoundError):
        auth.delete_user(u.uid, app=app)


def test_custom_claims_reach_the_next_id_token(admin):
    emu, app = admin
    first = phone_sign_in(emu, "+15551110010")
    uid = first["localId"]
    auth.set_custom_user_claims(uid, {"role": "admin", "level": 3}, app=app)
    assert auth.get_user(uid, app=app).custom_claims == {"role": "admin", "level": 3}
    second = phone_sign_in(emu, "+15551110010")
    decoded = auth.verify_id_token(second["idToken"], app=app)
    assert decoded["role"] == "admin" and decoded["level"] == 3
    # Refreshing also picks up claims set later.
    auth.set_custom_user_claims(uid, {"role": "viewer"}, app=app)
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": second["refreshToken"]})
    assert claims_of(r.json()["access_token"])["role"] == "viewer"
    auth.set_custom_user_claims(uid, None, app=app)
    assert auth.get_user(uid, app=app).custom_claims is None


def test_claim_errors_from_the_server(admin):
    emu, app = admin
    uid = auth.create_user(app=app).uid
    url = f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update"
    h = {"Authorization": "Bearer owner"}
    assert requests.post(url, json={"localId": uid, "customAttributes": '{"sub": "x"}'}, headers=h).json()["error"]["message"] == "FORBIDDEN_CLAIM : sub"
    assert requests.post(url, json={"localId": uid, "customAttributes": '[1]'}, headers=h).json()["error"]["message"] == "INVALID_CLAIMS"
    assert requests.post(url, json={"localId": uid, "customAttributes": "not json"}, headers=h).json()["error"]["message"] == "INVALID_CLAIMS"
    big = json.dumps({"k": "x" * 1000})
    assert requests.post(url, json={"localId": uid, "customAttributes": big}, headers=h).json()["error"]["message"] == "CLAIMS_TOO_LARGE"
    r = emu.itk("update", {"idToken": phone_sign_in(emu, "+15551110011")["idToken"], "customAttributes": "{}"})
    assert error_message(r) == "INSUFFICIENT_PERMISSION"


def test_revocation_and_disabling(admin):
    emu, app = admin
    body = phone_sign_in(emu, "+15551110020")
    uid = body["localId"]
    assert auth.verify_id_token(body["idToken"], app=app, check_revoked=True)["uid"] == uid
    time.sleep(1.1)
    auth.revoke_refresh_tokens(uid, app=app)
    with pytest.raises(auth.RevokedIdTokenError):
        auth.verify_id_token(body["idToken"], app=app, check_revoked=True)
    assert error_message(emu.itk("lookup", {"idToken": body["idToken"]})) == "TOKEN_EXPIRED"
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert error_message(r) == "TOKEN_EXPIRED"
    fresh_body = phone_sign_in(emu, "+15551110020")
    assert auth.verify_id_token(fresh_body["idToken"], app=app, check_revoked=True)["uid"] == uid

    auth.update_user(uid, disabled=True, app=app)
    with pytest.raises(auth.UserDisabledError):
        auth.verify_id_token(fresh_body["idToken"], app=app, check_revoked=True)
    assert error_message(emu.itk("lookup", {"idToken": fresh_body["idToken"]})) == "USER_DISABLED"
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": fresh_body["refreshToken"]})
    assert error_message(r) == "USER_DISABLED"
    session = emu.send("+15551110020")
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": emu.code_for("+15551110020")})
    assert error_message(r) == "USER_DISABLED"
    auth.delete_user(uid, app=app)
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": fresh_body["refreshToken"]})
    assert error_message(r) in ("USER_NOT_FOUND", "INVALID_REFRESH_TOKEN")


def test_list_users_across_pages_and_delete_users(admin):
    emu, app = admin
    uids = [auth.create_user(uid=f"user-{i:02d}", phone_number=f"+1555222{i:04d}", app=app).uid for i in range(7)]
    page = auth.list_users(max_results=3, app=app)
    seen = [u.uid for u in page.users]
    pages = 1
    while page.has_next_page:
        page = page.get_next_page()
        seen += [u.uid for u in page.users]
        pages += 1
    assert seen == sorted(uids) and pages == 3
    assert sorted(u.uid for u in auth.list_users(app=app).iterate_all()) == sorted(uids)
    result = auth.delete_users(uids[:4] + ["never-existed"], app=app)
    assert result.success_count == 5 and result.failure_count == 0
    assert sorted(u.uid for u in auth.list_users(app=app).iterate_all()) == uids[4:]


def test_import_users_keeps_uid_phone_claims(admin):
    emu, app = admin
    users = [
        auth.ImportUserRecord(uid="imported-1", phone_number="+15553330001", custom_claims={"role": "tester"},
                              user_metadata=auth.UserMetadata(creation_timestamp=1_700_000_000_000, last_sign_in_timestamp=1_700_000_100_000)),
        auth.ImportUserRecord(uid="imported-2", phone_number="+15553330002", disabled=True, display_name="Bo"),
    ]
    result = auth.import_users(users, app=app)
    assert result.success_count == 2 and result.failure_count == 0
    u1 = auth.get_user("imported-1", app=app)
    assert u1.phone_number == "+15553330001" and u1.custom_claims == {"role": "tester"}
    assert u1.user_metadata.creation_timestamp == 1_700_000_000_000
    assert auth.get_user("imported-2", app=app).disabled is True
    body = phone_sign_in(emu, "+15553330001")
    assert body["localId"] == "imported-1" and body["isNewUser"] is False
    assert claims_of(body["idToken"])["role"] == "tester"
    # Per-user errors come back in a 200.
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate",
                      json={"users": [{"localId": "x1", "phoneNumber": "not#a$phone%number"}, {"localId": "x2", "phoneNumber": "+15553330009"}]},
                      headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200
    assert r.json()["error"] == [{"index": 0, "message": "phone number format is invalid"}]
    # firebase-tools import posts to tenants//accounts:batchCreate for the top-level project.
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants//accounts:batchCreate",
                      json={"users": [{"localId": "from-export", "phoneNumber": "+15553330010", "createdAt": "1700000000000"}]},
                      headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200 and "error" not in r.json()
    assert auth.get_user("from-export", app=app).phone_number == "+15553330010"


def test_query_accounts(admin):
    emu, app = admin
    for i in range(3):
        auth.create_user(uid=f"q{i}", phone_number=f"+1555444000{i}", app=app)
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:query",
                      json={"returnUserInfo": True, "limit": 2, "sortBy": "USER_ID", "order": "DESC"}, headers={"Authorization": "Bearer owner"})
    assert r.json()["recordsCount"] == "2" and [u["localId"] for u in r.json()["userInfo"]] == ["q2", "q1"]
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:query",
                      json={"expression": [{"phoneNumber": "+15554440001"}]}, headers={"Authorization": "Bearer owner"})
    assert [u["localId"] for u in r.json()["userInfo"]] == ["q1"]


def test_anonymous_user_links_phone_and_client_account_calls(admin):
    emu, app = admin
    r = emu.itk("signUp", {"returnSecureToken": True})
    assert r.status_code == 200, r.text
    anon = r.json()
    assert claims_of(anon["idToken"])["firebase"]["sign_in_provider"] == "anonymous"
    assert claims_of(anon["idToken"])["provider_id"] == "anonymous"
    linked = phone_sign_in(emu, "+15551110030", id_token=anon["idToken"])
    assert linked["localId"] == anon["localId"] and linked["isNewUser"] is False
    assert claims_of(linked["idToken"])["firebase"]["sign_in_provider"] == "phone"

    r = emu.itk("update", {"idToken": linked["idToken"], "displayName": "Phone Person", "returnSecureToken": True})
    assert r.status_code == 200 and r.json()["displayName"] == "Phone Person"
    r = emu.itk("update", {"idToken": linked["idToken"], "deleteProvider": ["phone"]})
    assert r.status_code == 200 and r.json()["providerUserInfo"] == []
    assert auth.get_user(anon["localId"], app=app).phone_number is None

    # Legacy v3 twins.
    base = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
    r = emu.post(base + "setAccountInfo", {"idToken": linked["idToken"], "displayName": "V3"})
    assert r.status_code == 200 and r.json()["displayName"] == "V3"
    r = emu.post(base + "signupNewUser", {})
    assert r.status_code == 200 and r.json()["idToken"]
    r = emu.post(base + "deleteAccount", {"idToken": linked["idToken"]})
    assert r.status_code == 200 and r.json()["kind"]
    with pytest.raises(auth.UserNotFoundError):
        auth.get_user(anon["localId"], app=app)
    assert error_message(emu.itk("delete", {})) == "MISSING_ID_TOKEN"
    assert error_message(emu.itk("signUp", {"localId": "x"})) == "UNEXPECTED_PARAMETER : User ID"


V2 = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"
OWNER = {"Authorization": "Bearer owner"}


def test_tenants_and_tenant_scoped_admin(fresh, monkeypatch):
    """Tenant CRUD over the v2 REST API (what Node's tenantManager() sends; Python's tenant_mgt CRUD always calls
    production), then the tenant-scoped firebase-admin client, which honours the emulator."""
    emu = fresh()
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    with credentialed_app("tenants") as app:
        _tenant_flow(emu, app)


def _tenant_flow(emu, app):
    r = requests.post(emu.url + V2, json={"displayName": "team-a", "allowPasswordSignup": True}, headers=OWNER)
    assert r.status_code == 200, r.text
    t = tenant_mgt.Tenant(r.json())
    assert t.tenant_id.startswith("team-a-") and t.display_name == "team-a" and t.allow_password_sign_up
    assert requests.post(emu.url + V2, json={"displayName": "team-a"}).status_code == 401
    assert tenant_mgt.Tenant(requests.get(f"{emu.url}{V2}/{t.tenant_id}", headers=OWNER).json()).display_name == "team-a"
    r = requests.patch(f"{emu.url}{V2}/{t.tenant_id}", params={"updateMask": "displayName"}, json={"displayName": "team-b"}, headers=OWNER)
    assert tenant_mgt.Tenant(r.json()).display_name == "team-b"
    listed = requests.get(emu.url + V2, headers=OWNER).json()["tenants"]
    assert t.tenant_id in [tenant_mgt.Tenant(x).tenant_id for x in listed]
    r = requests.post(emu.url + V2, json={"displayName": "1bad name"}, headers=OWNER)
    assert r.status_code == 400

    tauth = tenant_mgt.auth_for_tenant(t.tenant_id, app=app)
    tu = tauth.create_user(phone_number="+15556660001")
    assert tauth.get_user(tu.uid).tenant_id == t.tenant_id
    with pytest.raises(auth.UserNotFoundError):
        auth.get_user(tu.uid, app=app)

    # Phone sign-in inside the tenant: the same uid, and firebase.tenant in the token.
    body = phone_sign_in(emu, "+15556660001", tenant=t.tenant_id)
    assert body["localId"] == tu.uid
    decoded = tauth.verify_id_token(body["idToken"])
    assert decoded["firebase"]["tenant"] == t.tenant_id
    with pytest.raises(Exception):
        auth.verify_id_token(body["idToken"], app=app, check_revoked=True)
    # The same number in the project is a different user.
    assert phone_sign_in(emu, "+15556660001")["localId"] != tu.uid
    tauth.set_custom_user_claims(tu.uid, {"tier": "gold"})
    assert claims_of(phone_sign_in(emu, "+15556660001", tenant=t.tenant_id)["idToken"])["tier"] == "gold"
    assert [u.uid for u in tauth.list_users().iterate_all()] == [tu.uid]

    assert requests.delete(f"{emu.url}/emulator/v1/projects/demo-phone/tenants/{t.tenant_id}/accounts").status_code == 200
    assert list(tauth.list_users().iterate_all()) == []
    assert requests.delete(f"{emu.url}{V2}/{t.tenant_id}", headers=OWNER).status_code == 200
    r = requests.get(f"{emu.url}{V2}/{t.tenant_id}", headers=OWNER)
    assert r.status_code == 404 and r.json()["error"]["message"] == "TENANT_NOT_FOUND"


def test_disabled_tenant_refuses_phone_sign_in(admin):
    emu, app = admin
    tid = requests.post(emu.url + V2, json={"displayName": "closed"}, headers=OWNER).json()["name"].rsplit("/", 1)[1]
    r = requests.patch(f"{emu.url}{V2}/{tid}", params={"updateMask": "disableAuth"}, json={"disableAuth": True}, headers=OWNER)
    assert r.status_code == 200 and r.json()["disableAuth"] is True
    r = emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL, "tenantId": tid})
    assert error_message(r) == "PROJECT_DISABLED"
    # Test numbers per tenant (production's tenant-level testPhoneNumbers).
    r = requests.patch(f"{emu.url}{V2}/{tid}", params={"updateMask": "disableAuth,testPhoneNumbers"},
                       json={"disableAuth": False, "testPhoneNumbers": {"+15558880001": "424242"}}, headers=OWNER)
    assert r.json()["testPhoneNumbers"] == {"+15558880001": "424242"}
    s = emu.itk("sendVerificationCode", {"phoneNumber": "+15558880001", "tenantId": tid}).json()["sessionInfo"]
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": "424242", "tenantId": tid})
    assert r.status_code == 200 and claims_of(r.json()["idToken"])["firebase"]["tenant"] == tid


def test_projects_are_isolated_and_api_keys_route(fresh, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"apiKeys": {"key-for-b": "project-b"},
                               "projects": {"project-b": {"signIn": {"phoneNumber": {"testPhoneNumbers": {"+15557770001": "777777"}}}}}}))
    emu = fresh("--config", str(cfg))
    s = emu.itk("sendVerificationCode", {"phoneNumber": "+15557770001"}, key="key-for-b").json()["sessionInfo"]
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": "777777"}, key="key-for-b")
    assert r.status_code == 200, r.text
    b_user = r.json()
    assert claims_of(b_user["idToken"])["aud"] == "project-b"
    # The default project does not know that number's code or that user.
    s = emu.itk("sendVerificationCode", {"phoneNumber": "+15557770001"}).json()["sessionInfo"]
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": "777777"})) == "INVALID_CODE"
    h = {"Authorization": "Bearer owner"}
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", json={"localId": [b_user["localId"]]}, headers=h)
    assert "users" not in r.json()
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/project-b/accounts:lookup", json={"localId": [b_user["localId"]]}, headers=h)
    assert len(r.json()["users"]) == 1
    assert error_message(emu.itk("lookup", {"idToken": b_user["idToken"]})) == "INVALID_ID_TOKEN"
    assert emu.itk("lookup", {"idToken": b_user["idToken"]}, key="key-for-b").status_code == 200
