"""Issue 13, second differential run against the official emulator (tenants, v3 paths, MFA edges): what it found and
we fixed, against the release binary, with firebase-admin's tenant-scoped client where Python's SDK has the call."""
import uuid

import firebase_admin
import pytest
import requests
from firebase_admin import auth, tenant_mgt

from conftest import claims_of, dummy_credential, error_message

OWNER = {"Authorization": "Bearer owner"}
TENANTS = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"
V2 = "/identitytoolkit.googleapis.com/v2/accounts/"
V3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"


def new_tenant(emu, **body):
    r = requests.post(emu.url + TENANTS, json={"allowPasswordSignup": True, **body}, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()["tenantId"]


@pytest.fixture
def tenant_admin(fresh, monkeypatch):
    emu = fresh()
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    app = firebase_admin.initialize_app(dummy_credential(), options={"projectId": "demo-phone"}, name=f"diff-{uuid.uuid4()}")
    yield emu, app
    firebase_admin.delete_app(app)


def test_disabled_tenant_answers_project_disabled_before_credentials(tenant_admin):
    emu, app = tenant_admin
    tid = new_tenant(emu, displayName="closed-pw")
    tenant_mgt.auth_for_tenant(tid, app=app).create_user(uid="u1", email="u1@example.com", password="secret12")
    r = requests.patch(f"{emu.url}{TENANTS}/{tid}", params={"updateMask": "disableAuth"}, json={"disableAuth": True}, headers=OWNER)
    assert r.status_code == 200 and r.json()["disableAuth"] is True
    for body in ({"email": "u1@example.com", "password": "secret12"}, {"email": "u1@example.com", "password": "wrong-pass"},
                 {"email": "nobody@example.com", "password": "secret12"}):
        assert error_message(emu.itk("signInWithPassword", {**body, "tenantId": tid})) == "PROJECT_DISABLED"
        assert error_message(emu.post(V3 + "verifyPassword", {**body, "tenantId": tid})) == "PROJECT_DISABLED"
    assert error_message(emu.itk("createAuthUri", {"identifier": "u1@example.com", "continueUri": "http://localhost/", "tenantId": tid})) == "PROJECT_DISABLED"
    assert error_message(emu.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": "u1@example.com", "tenantId": tid})) == "PROJECT_DISABLED"
    assert requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/tenants/{tid}/oobCodes").json()["oobCodes"] == []
    requests.patch(f"{emu.url}{TENANTS}/{tid}", params={"updateMask": "disableAuth"}, json={"disableAuth": False}, headers=OWNER)
    r = emu.itk("signInWithPassword", {"email": "u1@example.com", "password": "secret12", "tenantId": tid})
    assert r.status_code == 200 and claims_of(r.json()["idToken"])["firebase"]["tenant"] == tid


def test_verify_email_with_a_tenant_token_and_no_tenant_id(tenant_admin):
    """What an SDK that leaves tenantId out of sendOobCode sends: the token's tenant is used (was USER_NOT_FOUND)."""
    emu, app = tenant_admin
    tid = new_tenant(emu, displayName="oob-tenant")
    r = emu.itk("signUp", {"email": "ada@example.com", "password": "secret12", "tenantId": tid, "returnSecureToken": True})
    id_token = r.json()["idToken"]
    r = emu.itk("sendOobCode", {"requestType": "VERIFY_EMAIL", "idToken": id_token})
    assert r.status_code == 200, r.text
    codes = requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/tenants/{tid}/oobCodes").json()["oobCodes"]
    assert [(c["email"], c["requestType"]) for c in codes] == [("ada@example.com", "VERIFY_EMAIL")]
    assert f"tenantId={tid}" in codes[0]["oobLink"]
    assert requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/oobCodes").json()["oobCodes"] == []
    r = emu.itk("update", {"oobCode": codes[0]["oobCode"], "tenantId": tid})
    assert r.status_code == 200 and r.json()["emailVerified"] is True
    tauth = tenant_mgt.auth_for_tenant(tid, app=app)
    assert tauth.get_user_by_email("ada@example.com").email_verified is True
    other = new_tenant(emu, displayName="oob-other")
    assert error_message(emu.itk("sendOobCode", {"requestType": "VERIFY_EMAIL", "idToken": id_token, "tenantId": other})) == "TENANT_ID_MISMATCH"


def test_mfa_enrollment_with_another_tenants_token_is_a_tenant_mismatch(tenant_admin):
    emu, _ = tenant_admin
    on = new_tenant(emu, displayName="mfa-on", mfaConfig={"state": "ENABLED", "enabledProviders": ["PHONE_SMS"]})
    off = new_tenant(emu, displayName="mfa-off")
    id_token = emu.itk("signUp", {"email": "bo@example.com", "password": "secret12", "tenantId": on, "returnSecureToken": True}).json()["idToken"]
    body = {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": "+15555550111"}}
    assert error_message(emu.post(V2 + "mfaEnrollment:start", {**body, "tenantId": off})) == "TENANT_ID_MISMATCH"
    assert error_message(emu.post(V2 + "mfaEnrollment:finalize", {**body, "tenantId": off})) == "TENANT_ID_MISMATCH"
    assert error_message(emu.post(V2 + "mfaEnrollment:start", {**body, "idToken": "garbage", "tenantId": off})) == \
        "OPERATION_NOT_ALLOWED : SMS based MFA not enabled."
    assert error_message(emu.post(V2 + "mfaEnrollment:start", {**body, "tenantId": on})).startswith("UNVERIFIED_EMAIL")


def test_batch_create_refuses_a_user_of_another_tenant(tenant_admin):
    emu, app = tenant_admin
    tid = new_tenant(emu, displayName="import-t")
    r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/{tid}/accounts:batchCreate", headers=OWNER, json={
        "users": [{"localId": "a1", "email": "a1@example.com", "emailVerified": True, "tenantId": "someone-else",
                   "mfaInfo": [{"phoneInfo": "+15555550111", "mfaEnrollmentId": "e1"}]},
                  {"localId": "a2", "email": "a2@example.com", "emailVerified": True, "tenantId": tid,
                   "mfaInfo": [{"phoneInfo": "+15555550111", "mfaEnrollmentId": "e2"}]}]})
    assert r.status_code == 200, r.text
    assert r.json()["error"] == [{"index": 0, "message": "Tenant id in userInfo does not match the tenant id in request."}]
    tauth = tenant_mgt.auth_for_tenant(tid, app=app)
    with pytest.raises(auth.UserNotFoundError):
        tauth.get_user("a1")
    a2 = tauth.get_user("a2")
    assert a2.tenant_id == tid
    lookup = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/{tid}/accounts:lookup",
                           json={"localId": ["a2"]}, headers=OWNER).json()["users"][0]
    assert [e["mfaEnrollmentId"] for e in lookup["mfaInfo"]] == ["e2"]


def test_imported_email_user_without_a_password_has_no_password_provider(tenant_admin):
    """import_users with an email and no password hash: no `password` provider, and createAuthUri lists none (the
    official emulator and production; we showed one and answered allProviders ["password"])."""
    emu, app = tenant_admin
    result = auth.import_users([
        auth.ImportUserRecord(uid="nopw", email="nopw@example.com", email_verified=True),
        auth.ImportUserRecord(uid="withphone", email="wp@example.com", phone_number="+15555550177"),
    ], app=app)
    assert result.success_count == 2, [e.reason for e in result.errors]
    user = auth.get_user("nopw", app=app)
    assert user.email == "nopw@example.com" and user.provider_data == []
    assert [p.provider_id for p in auth.get_user("withphone", app=app).provider_data] == ["phone"]
    # With email enumeration protection off, as the official emulator's default, createAuthUri tells.
    r = emu.session.patch(f"{emu.url}/emulator/v1/projects/demo-phone/config", json={"emailPrivacyConfig": {"enableImprovedEmailPrivacy": False}})
    assert r.status_code == 200, r.text
    r = emu.itk("createAuthUri", {"identifier": "nopw@example.com", "continueUri": "http://localhost/"})
    assert r.status_code == 200 and r.json()["registered"] is True
    assert "allProviders" not in r.json() and "signinMethods" not in r.json()
    # A password set later brings the provider (and the sign-in method) with it.
    auth.update_user("nopw", password="secret12", app=app)
    assert [p.provider_id for p in auth.get_user("nopw", app=app).provider_data] == ["password"]
    r = emu.itk("createAuthUri", {"identifier": "nopw@example.com", "continueUri": "http://localhost/"})
    assert r.json()["allProviders"] == ["password"] and r.json()["signinMethods"] == ["password"]


def test_enrolled_at_is_productions_timestamp_json(tenant_admin):
    """`enrolledAt` given as a whole second comes back without `.000` (production's Timestamp JSON; we wrote
    `.000Z`), a fraction keeps three digits, and production's 9-digit form imports (it used to trap the server)."""
    emu, app = tenant_admin
    auth.create_user(uid="m1", email="m1@example.com", email_verified=True, app=app)
    r = emu.post("/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update", {"localId": "m1", "mfa": {"enrollments": [
        {"phoneInfo": "+15555550111", "mfaEnrollmentId": "e1", "enrolledAt": "2024-01-02T03:04:05Z"},
        {"phoneInfo": "+15555550122", "mfaEnrollmentId": "e2", "enrolledAt": "2024-01-02T03:04:05.120Z"}]}}, key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    assert [e["enrolledAt"] for e in auth.get_user("m1", app=app)._data["mfaInfo"]] == ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.120Z"]
    r = emu.post("/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate", {"users": [
        {"localId": "m2", "email": "m2@example.com", "emailVerified": True,
         "mfaInfo": [{"phoneInfo": "+15555550133", "mfaEnrollmentId": "n1", "enrolledAt": "2023-05-06T07:08:09.987654321Z"}]}]},
        key=None, headers=OWNER)
    assert r.status_code == 200 and "error" not in r.json(), r.text
    assert auth.get_user("m2", app=app)._data["mfaInfo"][0]["enrolledAt"] == "2023-05-06T07:08:09.987Z"
    # The hint of an MFA-required sign-in carries the same form.
    auth.update_user("m1", password="secret12", app=app)
    r = emu.itk("signInWithPassword", {"email": "m1@example.com", "password": "secret12", "returnSecureToken": True})
    assert r.status_code == 200 and [h["enrolledAt"] for h in r.json()["mfaInfo"]] == ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.120Z"]
