"""Issue 25: email-link sign-in against the release binary — the official emulator's emailLink.spec.ts (items 1–22),
the oob/rest/createAuthUri/idp spec items about EMAIL_SIGNIN, written anew over plain HTTP; plus what production does
and the official emulator does not (codes expire on the emulator clock, single use, emails validated), the inbox, its
long-poll, events, --data-dir, every page of GET /emulator/action (and that it is no open redirect), hostile input;
firebase-admin's generate_*_link with ActionCodeSettings; the real JS SDK (js/email_link_flow.cjs); a real browser
following a link to a local page."""
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.parse
import uuid

import jwt
import pytest
import requests

from conftest import (FICTIONAL, FICTIONAL_CODE, HAVE_BROWSER, Emulator, claims_of, error_message, headless_chromium, send_body, send_json,
                      serve_in_background)

OWNER = {"Authorization": "Bearer owner"}
P = "demo-phone"
V2 = "/identitytoolkit.googleapis.com/v2"
TENANTS = f"{V2}/projects/{P}/tenants"
ADMIN = f"/identitytoolkit.googleapis.com/v1/projects/{P}"
V3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
SIX_HOURS = 6 * 3600
JS_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "email_link_flow.cjs")
HAVE_JS = bool(os.environ.get("FIREBASE_SDK_DIR")) and shutil.which("node") is not None


# -- helpers ------------------------------------------------------------------------------------------------------

def unique(name="u"):
    return f"{name}-{uuid.uuid4().hex[:10]}@example.com"


def privacy_off(emu, path=f"/emulator/v1/projects/{P}/config"):
    r = emu.session.patch(emu.url + path, json={"emailPrivacyConfig": {"enableImprovedEmailPrivacy": False}})
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def emu():
    """One server for the tests that keep to their own emails; email enumeration protection off, as the official
    emulator (so createAuthUri lists sign-in methods)."""
    e = Emulator()
    privacy_off(e)
    yield e
    assert e.stop() == 0


def new_server(fresh, *args):
    e = fresh(*args)
    privacy_off(e)
    return e


def send_link(emu, email, tenant=None, continue_url=None, **extra):
    """What the official specs' createEmailSignInOob does: admin sendOobCode EMAIL_SIGNIN with returnOobLink."""
    body = {"requestType": "EMAIL_SIGNIN", "email": email, "returnOobLink": True, **extra}
    if tenant:
        body["tenantId"] = tenant
    if continue_url:
        body["continueUrl"] = continue_url
    r = emu.post("/identitytoolkit.googleapis.com/v1/accounts:sendOobCode", body, key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()


def link_sign_in(emu, email, code, **extra):
    return emu.itk("signInWithEmailLink", {"email": email, "oobCode": code, **extra})


def inbox(emu, tenant=None, email=None):
    path = f"/emulator/v1/projects/{P}" + (f"/tenants/{tenant}" if tenant else "") + "/oobCodes"
    r = emu.session.get(emu.url + path, params={"email": email} if email else {})
    assert r.status_code == 200, r.text
    return r.json()["oobCodes"]


def methods(emu, email, tenant=None):
    body = {"identifier": email, "continueUri": "http://example.com/"}
    if tenant:
        body["tenantId"] = tenant
    r = emu.itk("createAuthUri", body)
    assert r.status_code == 200, r.text
    return r.json().get("signinMethods", [])


def register(emu, email, password="notasecret", **extra):
    r = emu.itk("signUp", {"email": email, "password": password, "returnSecureToken": True, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def phone_user(emu, phone):
    session = emu.send(phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": emu.code_for(phone)})
    assert r.status_code == 200, r.text
    return r.json()


def admin_update(emu, body, tenant=None):
    path = ADMIN + (f"/tenants/{tenant}" if tenant else "") + "/accounts:update"
    r = emu.post(path, body, key=None, headers=OWNER)
    assert r.status_code == 200, r.text


def admin_user(emu, body, tenant=None):
    path = ADMIN + (f"/tenants/{tenant}" if tenant else "") + "/accounts"
    r = emu.post(path, body, key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()["localId"]


def lookup(emu, local_id, tenant=None):
    path = ADMIN + (f"/tenants/{tenant}" if tenant else "") + "/accounts:lookup"
    r = emu.post(path, {"localId": [local_id]}, key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()["users"][0]


def new_tenant(emu, **body):
    r = emu.session.post(emu.url + TENANTS, json={"displayName": "emaillink", **body}, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()["tenantId"]


def action(emu, params):
    return emu.session.get(emu.url + "/emulator/action", params=params, allow_redirects=False)


def follow(emu, link, **extra):
    """GET an inbox link (the email's button) without following the redirect."""
    if extra:
        link += "&" + urllib.parse.urlencode(extra)
    return emu.session.get(link, allow_redirects=False)


def query_of(url):
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)


def page(r):
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    assert "\n  " in r.text, "pretty-printed, as the official emulator's pages"
    return r.json()["authEmulator"]


def google(emu, claims, **extra):
    """signInWithIdp with JSON claims, as the official specs' signInWithFakeClaims."""
    claims = {"iss": "example.com", "aud": "example.com", "exp": 1597974008, "iat": 1597970408, **claims}
    body = {"postBody": "providerId=google.com&id_token=" + urllib.parse.quote(json.dumps(claims)),
            "requestUri": "http://localhost", "returnIdpCredential": True, "returnSecureToken": True, **extra}
    r = emu.itk("signInWithIdp", body)
    assert r.status_code == 200, r.text
    return r.json()


def events(emu, types):
    r = emu.session.get(f"{emu.url}/emulator/v1/projects/{P}/events",
                        params={"format": "jsonl", "since": "0", "follow": "false", "type": types}, timeout=10)
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


# -- emailLink.spec.ts: sign-up, sign-in, link ---------------------------------------------------------------------

def test_a_new_email_gets_an_account_and_only_the_email_link_method(emu):
    email = unique("alice")
    sent = send_link(emu, email)
    assert list(sent) == ["kind", "email", "oobCode", "oobLink"] and sent["email"] == email
    mine = inbox(emu, email=email)
    assert [(c["email"], c["requestType"], c["oobCode"]) for c in mine] == [(email, "EMAIL_SIGNIN", sent["oobCode"])]
    r = link_sign_in(emu, email, mine[0]["oobCode"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["kind", "email", "localId", "isNewUser", "idToken", "refreshToken", "expiresIn"]
    assert body["kind"] == "identitytoolkit#EmailLinkSigninResponse" and body["email"] == email
    assert body["isNewUser"] is True and body["expiresIn"] == "3600"
    c = claims_of(body["idToken"])
    assert c["user_id"] == c["sub"] == body["localId"] and "provider_id" not in c
    assert c["firebase"]["sign_in_provider"] == "password", "production calls the email link provider 'password'"
    assert c["firebase"]["identities"] == {"email": [email]} and c["email"] == email and c["email_verified"] is True
    assert methods(emu, email) == ["emailLink"]
    user = lookup(emu, body["localId"])
    assert user["emailLinkSignin"] is True and user["emailVerified"] is True and "passwordHash" not in user
    assert user["providerUserInfo"] == [{"providerId": "password", "rawId": email, "email": email, "federatedId": email}]
    # The refresh token works, and the fresh ID token says the same.
    r = emu.session.post(emu.url + "/securetoken.googleapis.com/v1/token", params={"key": "k"},
                         data={"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.status_code == 200 and claims_of(r.json()["id_token"])["firebase"]["sign_in_provider"] == "password"


def test_an_existing_password_user_signs_in_and_gains_email_link(emu):
    email = unique("bob")
    user = register(emu, email)
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == user["localId"] and r.json()["isNewUser"] is False
    r = emu.itk("lookup", {"idToken": user["idToken"]})
    assert r.status_code == 200 and r.json()["users"][0]["emailLinkSignin"] is True
    assert r.json()["users"][0]["emailVerified"] is True
    assert methods(emu, email) == ["password", "emailLink"]
    # The password still signs in.
    assert emu.itk("signInWithPassword", {"email": email, "password": "notasecret"}).status_code == 200


def test_an_unknown_code_is_invalid_oob_code(emu):
    r = link_sign_in(emu, unique(), "invalid")
    assert r.status_code == 400 and error_message(r) == "INVALID_OOB_CODE"


def test_a_user_disabled_after_the_code_was_sent(emu):
    email = unique("bob")
    user = register(emu, email)
    code = send_link(emu, email)["oobCode"]
    admin_update(emu, {"localId": user["localId"], "disableUser": True})
    r = link_sign_in(emu, email, code)
    assert r.status_code == 400 and error_message(r) == "USER_DISABLED"


def test_another_email_is_invalid_email_and_leaves_the_code_usable(emu):
    email = unique("alice")
    code = send_link(emu, email)["oobCode"]
    r = link_sign_in(emu, "NOT-" + email, code)
    assert r.status_code == 400
    assert error_message(r) == "INVALID_EMAIL : The email provided does not match the sign-in email address."
    # The email is compared lowercased; the code was not used up.
    r = link_sign_in(emu, email.upper(), code)
    assert r.status_code == 200 and r.json()["email"] == email


def test_linking_moves_a_password_user_to_the_links_email(emu):
    old, new = unique("bob"), unique("alice")
    user = register(emu, old)
    r = link_sign_in(emu, new, send_link(emu, new)["oobCode"], idToken=user["idToken"])
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == user["localId"] and r.json()["email"] == new and r.json()["isNewUser"] is False
    assert methods(emu, new) == ["password", "emailLink"]
    assert methods(emu, old) == []
    # The password went along to the new email.
    assert emu.itk("signInWithPassword", {"email": new, "password": "notasecret"}).status_code == 200
    assert error_message(emu.itk("signInWithPassword", {"email": old, "password": "notasecret"})) == "EMAIL_NOT_FOUND"


def test_linking_a_phone_user_adds_the_email_but_no_phone_method(emu):
    ph = phone_user(emu, "+15555550101")
    email = unique("alice")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"], idToken=ph["idToken"])
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == ph["localId"] and r.json()["email"] == email
    assert methods(emu, email) == ["emailLink"]
    c = claims_of(r.json()["idToken"])
    assert c["phone_number"] == "+15555550101" and c["email"] == email
    assert c["firebase"]["identities"]["email"] == [email] and c["firebase"]["identities"]["phone"] == ["+15555550101"]
    user = lookup(emu, ph["localId"])
    assert sorted(p["providerId"] for p in user["providerUserInfo"]) == ["password", "phone"]


def test_linking_to_an_email_another_account_owns_is_email_exists_and_burns_the_code(emu):
    ph = phone_user(emu, "+15555550102")
    email = unique("alice")
    register(emu, email)
    code = send_link(emu, email)["oobCode"]
    r = link_sign_in(emu, email, code, idToken=ph["idToken"])
    assert r.status_code == 400 and error_message(r) == "EMAIL_EXISTS"
    # As the official emulator: a code is used up once it matched, whatever follows.
    assert error_message(link_sign_in(emu, email, code)) == "INVALID_OOB_CODE"


def test_linking_with_a_disabled_users_token(emu):
    email = unique("alice")
    user = register(emu, email)
    admin_update(emu, {"localId": user["localId"], "disableUser": True})
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"], idToken=user["idToken"])
    assert r.status_code == 400 and error_message(r) == "USER_DISABLED"


def test_an_enrolled_user_gets_a_pending_credential_then_finishes_with_the_second_factor(emu):
    email = unique("mfa")
    uid = admin_user(emu, {"email": email, "password": "notasecret", "emailVerified": True,
                           "mfaInfo": [{"phoneInfo": FICTIONAL, "displayName": "Cell Phone"}]})
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert "idToken" not in body and "refreshToken" not in body
    assert body["localId"] == uid and body["email"] == email and body["isNewUser"] is False
    assert isinstance(body["mfaPendingCredential"], str) and len(body["mfaInfo"]) == 1
    assert body["mfaInfo"][0]["phoneInfo"] == "+*******4567"
    # The account is saved with email link on before the second factor.
    assert lookup(emu, uid)["emailLinkSignin"] is True
    start = emu.post(f"{V2}/accounts/mfaSignIn:start", {"mfaPendingCredential": body["mfaPendingCredential"],
                                                         "mfaEnrollmentId": body["mfaInfo"][0]["mfaEnrollmentId"]})
    assert start.status_code == 200, start.text
    done = emu.post(f"{V2}/accounts/mfaSignIn:finalize", {
        "mfaPendingCredential": body["mfaPendingCredential"],
        "phoneVerificationInfo": {"sessionInfo": start.json()["phoneResponseInfo"]["sessionInfo"], "code": FICTIONAL_CODE}})
    assert done.status_code == 200, done.text
    c = claims_of(done.json()["idToken"])
    assert c["sub"] == uid and c["firebase"]["sign_in_provider"] == "password"
    assert c["firebase"]["sign_in_second_factor"] == "phone"


def test_the_same_with_the_users_own_id_token(emu):
    """emailLink.spec: an MFA user's idToken with the link (what linkWithCredential sends) is still MFA-pending."""
    email = unique("mfa")
    uid = admin_user(emu, {"email": email, "emailVerified": True, "mfaInfo": [{"phoneInfo": "+15555550100"}]})
    r = emu.post(f"/emulator/v1/projects/{P}/idTokens", {"uid": uid})
    assert r.status_code == 200, r.text
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"], idToken=r.json()["idToken"])
    assert r.status_code == 200, r.text
    assert "idToken" not in r.json() and isinstance(r.json()["mfaPendingCredential"], str) and len(r.json()["mfaInfo"]) == 1


# -- tenants ------------------------------------------------------------------------------------------------------

def test_tenant_with_auth_disabled_is_project_disabled(emu):
    tid = new_tenant(emu, disableAuth=True)
    r = emu.itk("signInWithEmailLink", {"tenantId": tid})
    assert r.status_code == 400 and "PROJECT_DISABLED" in error_message(r)
    r = emu.itk("sendOobCode", {"tenantId": tid})
    assert r.status_code == 400 and error_message(r) == "PROJECT_DISABLED"


def test_tenant_with_email_link_off_is_operation_not_allowed_before_missing_email(emu):
    tid = new_tenant(emu, disableAuth=False, enableEmailLinkSignin=False)
    r = emu.itk("signInWithEmailLink", {"tenantId": tid})
    assert r.status_code == 400 and error_message(r) == "OPERATION_NOT_ALLOWED"
    r = emu.itk("sendOobCode", {"tenantId": tid, "email": "bob@example.com", "requestType": "EMAIL_SIGNIN"})
    assert r.status_code == 400 and error_message(r) == "OPERATION_NOT_ALLOWED"
    assert inbox(emu, tenant=tid) == []


def test_tenant_sign_up_lands_in_the_tenant(emu):
    # The legacy createAuthUri (enumeration protection off in this tenant) tells which methods the email has.
    tid = new_tenant(emu, disableAuth=False, enableEmailLinkSignin=True, emailPrivacyConfig={"enableImprovedEmailPrivacy": False})
    email = unique("alice")
    sent = send_link(emu, email, tenant=tid)
    assert f"tenantId={tid}" in sent["oobLink"]
    assert [c["oobCode"] for c in inbox(emu, tenant=tid)] == [sent["oobCode"]]
    assert inbox(emu, email=email) == [], "not in the project's inbox"
    # Without the tenant the code is unknown (it lives in the tenant).
    assert error_message(link_sign_in(emu, email, sent["oobCode"])) == "INVALID_OOB_CODE"
    r = link_sign_in(emu, email, sent["oobCode"], tenantId=tid)
    assert r.status_code == 200, r.text
    assert "tenantId" not in r.json(), "production's reply has no tenantId"
    assert lookup(emu, r.json()["localId"], tenant=tid)["tenantId"] == tid
    assert claims_of(r.json()["idToken"])["firebase"]["tenant"] == tid
    assert methods(emu, email, tenant=tid) == ["emailLink"] and methods(emu, email) == []


def test_tenant_mfa_user_gets_a_pending_credential(emu):
    tid = new_tenant(emu, disableAuth=False, enableEmailLinkSignin=True, allowPasswordSignup=True,
                     mfaConfig={"state": "ENABLED", "enabledProviders": ["PHONE_SMS"]})
    email = unique("alice")
    admin_user(emu, {"email": email, "password": "notasecret", "emailVerified": True, "mfaInfo": [{"phoneInfo": "+15555550100"}]},
               tenant=tid)
    r = link_sign_in(emu, email, send_link(emu, email, tenant=tid)["oobCode"], tenantId=tid)
    assert r.status_code == 200, r.text
    assert "idToken" not in r.json() and "refreshToken" not in r.json()
    assert isinstance(r.json()["mfaPendingCredential"], str) and len(r.json()["mfaInfo"]) == 1


def test_a_tenant_token_links_in_its_tenant_and_a_mismatch_is_refused(emu):
    tid = new_tenant(emu, enableEmailLinkSignin=True, allowPasswordSignup=True)
    other = new_tenant(emu, enableEmailLinkSignin=True)
    user = register(emu, unique("bob"), tenantId=tid)
    email = unique("alice")
    code = send_link(emu, email, tenant=tid)["oobCode"]
    r = link_sign_in(emu, email, code, idToken=user["idToken"], tenantId=other)
    assert r.status_code == 400 and error_message(r) == "TENANT_ID_MISMATCH"
    # The token names its tenant: no tenantId needed.
    r = link_sign_in(emu, email, code, idToken=user["idToken"])
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == user["localId"] and lookup(emu, user["localId"], tenant=tid)["email"] == email


# -- blocking functions (emailLink.spec "when blocking functions are present") --------------------------------------

class Function(http.server.BaseHTTPRequestHandler):
    """A blocking function as firebase-functions runs it in emulator mode: decodes the JWT without verifying it and
    answers what the test put in `replies` for the path."""
    received = []
    replies = {}

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        Function.received.append({"path": self.path, "payload": jwt.decode(body["data"]["jwt"], options={"verify_signature": False})})
        send_json(self, *Function.replies.get(self.path, (200, {})))


@pytest.fixture
def function():
    Function.received, Function.replies = [], {}
    server = serve_in_background(Function)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def configure(emu, base, **triggers):
    body = {"blockingFunctions": {"triggers": {k: {"functionUri": base + v} for k, v in triggers.items()}}}
    r = emu.session.patch(f"{emu.url}{V2}/projects/{P}/config", params={"updateMask": "blockingFunctions"}, json=body, headers=OWNER)
    assert r.status_code == 200, r.text


FIELDS = {"updateMask": "displayName,photoUrl,emailVerified,customClaims", "displayName": "Example User",
          "photoUrl": "http://fakephotourl.test", "emailVerified": True, "customClaims": {"customAttribute": "custom"}}
WITH_SESSION = {**FIELDS, "updateMask": FIELDS["updateMask"] + ",sessionClaims", "sessionClaims": {"sessionAttribute": "session"}}


def assert_fields(token, session=False):
    c = claims_of(token)
    assert (c["name"], c["picture"], c["email_verified"], c["customAttribute"]) == ("Example User", "http://fakephotourl.test", True, "custom")
    assert (c.get("sessionAttribute") == "session") is session


def test_before_create_sets_the_new_users_fields(fresh, function):
    emu = fresh()
    configure(emu, function, beforeCreate="/create")
    Function.replies["/create"] = (200, {"userRecord": FIELDS})
    email = unique("alice")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200, r.text
    assert r.json()["isNewUser"] is True and r.json()["email"] == email
    assert_fields(r.json()["idToken"])
    # Stored: the user keeps them.
    user = lookup(emu, r.json()["localId"])
    assert user["displayName"] == "Example User" and json.loads(user["customAttributes"]) == {"customAttribute": "custom"}


@pytest.mark.parametrize("trigger", ["beforeCreate", "beforeSignIn"])
def test_the_function_sees_an_email_link_sign_in(fresh, function, trigger):
    emu = fresh()
    configure(emu, function, **{trigger: "/fn"})
    Function.replies["/fn"] = (200, {"userRecord": {"updateMask": "displayName", "displayName": "Not tested"}})
    email = unique("alice")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200, r.text
    (call,) = Function.received
    p = call["payload"]
    assert p["event_type"] == trigger and p["sign_in_method"] == "emailLink"
    rec = p["user_record"]
    assert rec["uid"] == r.json()["localId"] == p["sub"] and rec["email"] == email and rec["email_verified"] is True
    # Ours sends seconds, as firebase-functions parses them (the official emulator: millisecond strings).
    assert isinstance(rec["metadata"]["creation_time"], int)
    assert rec["provider_data"] == [{"provider_id": "password", "email": email, "uid": email}]


def test_before_sign_in_sees_what_before_create_set(fresh, function):
    emu = fresh()
    configure(emu, function, beforeCreate="/create", beforeSignIn="/signin")
    Function.replies["/create"] = (200, {"userRecord": {**FIELDS, "emailVerified": False}})
    Function.replies["/signin"] = (200, {"userRecord": {"updateMask": "displayName", "displayName": "Not tested"}})
    email = unique("alice")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200, r.text
    assert [x["path"] for x in Function.received] == ["/create", "/signin"]
    rec = Function.received[1]["payload"]["user_record"]
    assert Function.received[1]["payload"]["sign_in_method"] == "emailLink"
    assert rec["email"] == email and rec["email_verified"] is False
    assert (rec["display_name"], rec["photo_url"], rec["custom_claims"]) == ("Example User", "http://fakephotourl.test", {"customAttribute": "custom"})
    assert isinstance(rec["metadata"]["creation_time"], int)
    # beforeSignIn's displayName wins; the email stays unverified as beforeCreate left it.
    c = claims_of(r.json()["idToken"])
    assert c["name"] == "Not tested" and c["email_verified"] is False


@pytest.mark.parametrize("before_create", [None, {"updateMask": "displayName,photoUrl,emailVerified,customClaims", "displayName": "oldDisplayName",
                                                   "photoUrl": "http://old.test", "emailVerified": False, "customClaims": {"customAttribute": "oldCustom"}}])
def test_before_sign_in_session_claims_for_a_new_user_overwrite_before_create(fresh, function, before_create):
    emu = fresh()
    configure(emu, function, beforeSignIn="/signin", **({"beforeCreate": "/create"} if before_create else {}))
    if before_create:
        Function.replies["/create"] = (200, {"userRecord": before_create})
    Function.replies["/signin"] = (200, {"userRecord": WITH_SESSION})
    email = unique("alice")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200 and r.json()["isNewUser"] is True, r.text
    assert_fields(r.json()["idToken"], session=True)


def test_before_sign_in_for_an_existing_user(fresh, function):
    emu = fresh()
    email = unique("bob")
    user = register(emu, email)
    code = send_link(emu, email)["oobCode"]
    configure(emu, function, beforeCreate="/create", beforeSignIn="/signin")
    Function.replies["/signin"] = (200, {"userRecord": WITH_SESSION})
    r = link_sign_in(emu, email, code)
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == user["localId"] and r.json()["isNewUser"] is False
    assert_fields(r.json()["idToken"], session=True)
    assert [x["path"] for x in Function.received] == ["/signin"], "no beforeCreate for an existing user"


def test_before_create_disabling_the_user_is_user_disabled(fresh, function):
    emu = fresh()
    configure(emu, function, beforeCreate="/create")
    Function.replies["/create"] = (200, {"userRecord": {"updateMask": "disabled", "disabled": True}})
    email = unique("alice")
    code = send_link(emu, email)["oobCode"]
    r = link_sign_in(emu, email, code)
    assert r.status_code == 400 and error_message(r) == "USER_DISABLED"
    # The user was saved (disabled), as the official emulator; the code is used up.
    r = emu.post(ADMIN + "/accounts:lookup", {"email": [email]}, key=None, headers=OWNER)
    assert r.json()["users"][0]["disabled"] is True
    assert error_message(link_sign_in(emu, email, code)) == "INVALID_OOB_CODE"


def test_a_blocking_before_create_saves_no_user(fresh, function):
    emu = fresh()
    configure(emu, function, beforeCreate="/block")
    Function.replies["/block"] = (400, {"error": {"message": "No sign-ups today", "status": "INVALID_ARGUMENT"}})
    email = unique("alice")
    code = send_link(emu, email)["oobCode"]
    r = link_sign_in(emu, email, code)
    assert r.status_code == 400 and error_message(r).startswith("BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to ")
    assert "No sign-ups today" in error_message(r)
    r = emu.post(ADMIN + "/accounts:lookup", {"email": [email]}, key=None, headers=OWNER)
    assert "users" not in r.json()
    # The code matched before the function ran, so it is used up (as the official emulator).
    assert error_message(link_sign_in(emu, email, code)) == "INVALID_OOB_CODE"


def test_an_enrolled_user_skips_the_functions(fresh, function):
    emu = fresh()
    email = unique("mfa")
    admin_user(emu, {"email": email, "emailVerified": True, "mfaInfo": [{"phoneInfo": FICTIONAL}]})
    configure(emu, function, beforeCreate="/create", beforeSignIn="/signin")
    r = link_sign_in(emu, email, send_link(emu, email)["oobCode"])
    assert r.status_code == 200 and "mfaPendingCredential" in r.json(), r.text
    assert Function.received == []


# -- oob.spec / rest.spec / createAuthUri.spec / idp.spec ------------------------------------------------------------

def test_return_oob_link_needs_admin_credentials(emu):
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": unique(), "returnOobLink": True})
    assert r.status_code == 400 and error_message(r) == "INSUFFICIENT_PERMISSION"
    # A client send answers only the email; the link is in the inbox and the log.
    email = unique("client")
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email.upper(), "clientType": "CLIENT_TYPE_WEB",
                                "continueUrl": "http://localhost/done", "canHandleCodeInApp": True})
    assert r.status_code == 200 and r.json() == {"kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": email}
    (code,) = inbox(emu, email=email)
    assert code["oobLink"].startswith(emu.url + "/emulator/action?mode=signIn&lang=en&oobCode=" + code["oobCode"] + "&apiKey=fake-api-key")
    assert code["oobLink"].endswith("&continueUrl=http%3A%2F%2Flocalhost%2Fdone")


def test_every_purpose_can_be_checked_without_using_it(fresh):
    emu = new_server(fresh)
    bob = register(emu, "bob@example.com")
    sends = [{"requestType": "PASSWORD_RESET", "email": "bob@example.com"},
             {"requestType": "VERIFY_EMAIL", "idToken": bob["idToken"]},
             {"requestType": "EMAIL_SIGNIN", "email": "bob@example.com"},
             {"requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": bob["idToken"], "newEmail": "bob2@example.com"}]
    for body in sends:
        r = emu.itk("sendOobCode", body)
        assert r.status_code == 200, r.text
    codes = inbox(emu)
    assert [c["requestType"] for c in codes] == ["PASSWORD_RESET", "VERIFY_EMAIL", "EMAIL_SIGNIN", "VERIFY_AND_CHANGE_EMAIL"]
    for c in codes:
        r = emu.itk("resetPassword", {"oobCode": c["oobCode"]})
        assert r.status_code == 200, r.text
        assert r.json()["requestType"] == c["requestType"]
        assert ("email" in r.json()) is (c["requestType"] != "EMAIL_SIGNIN"), "an email-link code names no account"
        assert ("newEmail" in r.json()) is (c["requestType"] == "VERIFY_AND_CHANGE_EMAIL")
    assert len(inbox(emu)) == 4, "checking uses nothing up"


def test_a_continue_url_that_is_not_absolute_makes_no_code(emu):
    email = unique()
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": "noSchemeOrHost"})
    assert r.status_code == 400 and "INVALID_CONTINUE_URI" in error_message(r)
    assert inbox(emu, email=email) == []


@pytest.mark.parametrize("path", ["/identitytoolkit.googleapis.com/v1/accounts:sendOobCode", V3 + "getOobConfirmationCode"])
def test_numeric_request_types(emu, path):
    """The Android SDK sends the proto enum's number: 6 is EMAIL_SIGNIN (rest.spec), 1/4/7 the others, 0 unspecified."""
    email = unique("num")
    r = emu.session.post(emu.url + path, json={"requestType": 6, "email": email, "returnOobLink": True}, headers=OWNER)
    assert r.status_code == 200, r.text
    assert "mode=signIn" in r.json()["oobLink"]
    register(emu, email)
    r = emu.session.post(emu.url + path, json={"requestType": 1, "email": email, "returnOobLink": True}, headers=OWNER)
    assert r.status_code == 200 and "mode=resetPassword" in r.json()["oobLink"], r.text
    r = emu.session.post(emu.url + path, json={"requestType": 4, "email": email, "returnOobLink": True}, headers=OWNER)
    assert r.status_code == 200 and "mode=verifyEmail" in r.json()["oobLink"], r.text
    r = emu.session.post(emu.url + path, json={"requestType": 7, "email": email, "newEmail": unique("n"), "returnOobLink": True}, headers=OWNER)
    assert r.status_code == 200 and "mode=verifyAndChangeEmail" in r.json()["oobLink"], r.text
    r = emu.session.post(emu.url + path, json={"requestType": 0, "email": email}, headers=OWNER)
    assert r.status_code == 400 and error_message(r) == "MISSING_REQ_TYPE"


def test_send_errors(emu):
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN"})
    assert r.status_code == 400 and error_message(r) == "MISSING_EMAIL"
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": "notanemail"})
    assert r.status_code == 400 and error_message(r) == "INVALID_EMAIL", "production validates the email (the official emulator does not)"
    r = emu.itk("sendOobCode", {"email": unique()})
    assert r.status_code == 400 and error_message(r) == "MISSING_REQ_TYPE"


def test_sign_in_errors_in_the_official_order(emu):
    assert error_message(emu.itk("signInWithEmailLink", {})) == "MISSING_EMAIL"
    assert error_message(emu.itk("signInWithEmailLink", {"oobCode": "x"})) == "MISSING_EMAIL"
    assert error_message(emu.itk("signInWithEmailLink", {"email": unique()})) == "MISSING_OOB_CODE"
    assert error_message(emu.itk("signInWithEmailLink", {"email": unique(), "oobCode": "x", "idToken": "garbage"})) == "INVALID_ID_TOKEN"
    # The legacy v3 path is the same operation.
    email = unique("v3")
    r = emu.post(V3 + "emailLinkSignin", {"email": email, "oobCode": send_link(emu, email)["oobCode"]})
    assert r.status_code == 200 and r.json()["kind"] == "identitytoolkit#EmailLinkSigninResponse" and r.json()["isNewUser"] is True


def test_create_auth_uri_finds_a_linked_user_by_both_emails(fresh):
    emu = new_server(fresh)
    g = google(emu, {"sub": "12345", "email": "alice@example.com", "email_verified": True})
    r = link_sign_in(emu, "bob@example.com", send_link(emu, "bob@example.com")["oobCode"], idToken=g["idToken"])
    assert r.status_code == 200 and r.json()["localId"] == g["localId"], r.text
    for email in ("bob@example.com", "alice@example.com"):
        r = emu.itk("createAuthUri", {"identifier": email, "continueUri": "http://localhost/"}).json()
        assert r["registered"] is True
        assert sorted(r["allProviders"]) == ["google.com", "password"] and sorted(r["signinMethods"]) == ["emailLink", "google.com"]


def test_create_auth_uri_with_duplicate_emails_allowed(fresh):
    emu = new_server(fresh)
    r = emu.session.patch(f"{emu.url}/emulator/v1/projects/{P}/config", json={"signIn": {"allowDuplicateEmails": True}})
    assert r.status_code == 200, r.text
    g = google(emu, {"sub": "12345", "email": "alice@example.com", "email_verified": True})
    assert link_sign_in(emu, "bob@example.com", send_link(emu, "bob@example.com")["oobCode"], idToken=g["idToken"]).status_code == 200
    r = emu.itk("createAuthUri", {"identifier": "bob@example.com", "continueUri": "http://localhost/"}).json()
    assert r["registered"] is True and r["allProviders"] == ["password"] and r["signinMethods"] == ["emailLink"]


def test_google_over_a_password_user_verified_by_an_email_link_keeps_the_password(fresh):
    """idp.spec: the email was verified through an email link, so a verified Google sign-in links instead of taking over."""
    emu = new_server(fresh)
    user = register(emu, "foo@example.com", displayName="Foo")
    assert link_sign_in(emu, "foo@example.com", send_link(emu, "foo@example.com")["oobCode"]).status_code == 200
    g = google(emu, {"sub": "123456789012345678901", "email": "foo@example.com", "email_verified": True,
                     "picture": "http://localhost/photo-from-idp.png"})
    assert g["localId"] == user["localId"]
    assert sorted(methods(emu, "foo@example.com")) == ["emailLink", "google.com", "password"]
    info = emu.itk("lookup", {"idToken": g["idToken"]}).json()["users"][0]
    assert info["emailVerified"] is True and info["photoUrl"] == "http://localhost/photo-from-idp.png"
    assert "displayName" not in info, "overwritten by the IdP, which gave none"


def test_google_over_an_enrolled_email_link_user_links_before_the_second_factor(fresh):
    emu = new_server(fresh)
    r = link_sign_in(emu, "alice@example.com", send_link(emu, "alice@example.com")["oobCode"])
    assert r.status_code == 200, r.text
    uid, token = r.json()["localId"], r.json()["idToken"]
    start = emu.post(f"{V2}/accounts/mfaEnrollment:start", {"idToken": token, "phoneEnrollmentInfo": {"phoneNumber": FICTIONAL}})
    assert start.status_code == 200, start.text
    done = emu.post(f"{V2}/accounts/mfaEnrollment:finalize", {"idToken": token, "phoneVerificationInfo": {
        "sessionInfo": start.json()["phoneSessionInfo"]["sessionInfo"], "code": FICTIONAL_CODE}})
    assert done.status_code == 200, done.text
    g = google(emu, {"sub": "123456789012345678901", "name": "Foo", "email": "alice@example.com", "email_verified": True})
    assert "idToken" not in g and "refreshToken" not in g
    assert isinstance(g["mfaPendingCredential"], str) and len(g["mfaInfo"]) == 1
    assert sorted(methods(emu, "alice@example.com")) == ["emailLink", "google.com"]
    assert lookup(emu, uid)["displayName"] == "Foo"


# -- beyond the official emulator: expiry, single use, wrong types ---------------------------------------------------

def test_codes_expire_after_six_hours_on_the_emulator_clock(fresh):
    emu = new_server(fresh)
    early, late = "early@example.com", "late@example.com"
    early_code = send_link(emu, early, continue_url="http://localhost/done")
    late_code = send_link(emu, late, continue_url="http://localhost/done")
    try:
        assert emu.session.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": SIX_HOURS - 60}).status_code == 200
        # Still good a minute before: the link leads on and the code signs in.
        assert follow(emu, early_code["oobLink"]).status_code == 303
        assert link_sign_in(emu, early, early_code["oobCode"]).status_code == 200
        assert emu.session.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 60}).status_code == 200
        # Six hours on: production's EXPIRED_OOB_CODE (the JS SDK's auth/expired-action-code), everywhere.
        assert emu.itk("resetPassword", {"oobCode": late_code["oobCode"]}).json()["error"]["message"] == "EXPIRED_OOB_CODE"
        r = follow(emu, late_code["oobLink"])
        assert r.status_code == 400 and page(r)["error"] == "Your request to sign in has expired or the link has already been used."
        late_send = send_link(emu, late)  # a new one for the same email still works
        r = link_sign_in(emu, late, late_code["oobCode"])
        assert r.status_code in (400,) and error_message(r) in ("EXPIRED_OOB_CODE", "INVALID_OOB_CODE")
        assert link_sign_in(emu, late, late_send["oobCode"]).status_code == 200
    finally:
        emu.session.post(emu.url + "/emulator/v1/clock:reset", json={})


def test_an_expired_code_answers_expired_and_then_is_gone(fresh):
    emu = new_server(fresh)
    code = send_link(emu, "late@example.com")["oobCode"]
    try:
        emu.session.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": SIX_HOURS})
        r = link_sign_in(emu, "late@example.com", code)
        assert r.status_code == 400 and error_message(r) == "EXPIRED_OOB_CODE"
        assert error_message(link_sign_in(emu, "late@example.com", code)) == "INVALID_OOB_CODE"
        assert inbox(emu, email="late@example.com") == []
    finally:
        emu.session.post(emu.url + "/emulator/v1/clock:reset", json={})


def test_a_code_is_single_use(emu):
    email = unique()
    code = send_link(emu, email)["oobCode"]
    assert link_sign_in(emu, email, code).status_code == 200
    r = link_sign_in(emu, email, code)
    assert r.status_code == 400 and error_message(r) == "INVALID_OOB_CODE"
    assert inbox(emu, email=email) == []


def test_other_purposes_codes_are_no_email_link_codes_and_stay_usable(emu):
    email = unique()
    register(emu, email)
    reset = send_link(emu, email, requestType="PASSWORD_RESET")
    assert "mode=resetPassword" in reset["oobLink"]
    r = link_sign_in(emu, email, reset["oobCode"])
    assert r.status_code == 400 and error_message(r) == "INVALID_OOB_CODE"
    verify = send_link(emu, email, requestType="VERIFY_EMAIL")
    assert error_message(link_sign_in(emu, email, verify["oobCode"])) == "INVALID_OOB_CODE"
    # Neither was used up by the refusal.
    assert emu.itk("resetPassword", {"oobCode": reset["oobCode"], "newPassword": "another-one"}).status_code == 200
    assert emu.itk("update", {"oobCode": verify["oobCode"]}).json()["emailVerified"] is True
    # And the other way round: an email-link code resets no password and verifies nothing.
    link = send_link(emu, email)["oobCode"]
    assert error_message(emu.itk("resetPassword", {"oobCode": link, "newPassword": "third-one"})) == "INVALID_OOB_CODE"
    assert error_message(emu.itk("update", {"oobCode": link})) == "INVALID_OOB_CODE"
    assert link_sign_in(emu, email, link).status_code == 200


# -- the inbox, its long-poll, events, --data-dir -------------------------------------------------------------------

def test_the_inbox_and_its_long_poll(emu):
    email = unique("wait")
    got = {}

    def wait():
        got["r"] = requests.get(f"{emu.url}/emulator/v1/projects/{P}/oobCodes:wait", params={"email": email, "timeoutSeconds": "20"}, timeout=30)

    t = threading.Thread(target=wait)
    t.start()
    # Whether the poll is registered before the send (then the send answers it) or after (then the pending code does),
    # it gets this code.
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": "http://localhost/x"})
    assert r.status_code == 200
    t.join(30)
    w = got["r"]
    assert w.status_code == 200, w.text
    assert w.json()["requestType"] == "EMAIL_SIGNIN" and w.json()["email"] == email and "mode=signIn" in w.json()["oobLink"]
    assert [c["oobCode"] for c in inbox(emu, email=email.upper())] == [w.json()["oobCode"]]
    # Answered at once now that one is pending.
    again = emu.session.get(f"{emu.url}/emulator/v1/projects/{P}/oobCodes:wait", params={"email": email, "timeoutSeconds": "0"})
    assert again.status_code == 200 and again.json()["oobCode"] == w.json()["oobCode"]
    # DELETE ?email= invalidates it.
    d = emu.session.delete(f"{emu.url}/emulator/v1/projects/{P}/oobCodes", params={"email": email})
    assert d.status_code == 200 and d.json() == {"deleted": 1}
    assert error_message(link_sign_in(emu, email, w.json()["oobCode"])) == "INVALID_OOB_CODE"


def test_events_of_an_email_link_sign_up_and_link(fresh):
    emu = new_server(fresh)
    code = send_link(emu, "ev@example.com")["oobCode"]
    r = link_sign_in(emu, "ev@example.com", code)
    assert r.status_code == 200
    uid = r.json()["localId"]
    ph = phone_user(emu, "+15555550177")
    assert link_sign_in(emu, "ev2@example.com", send_link(emu, "ev2@example.com")["oobCode"], idToken=ph["idToken"]).status_code == 200
    evs = events(emu, "oob.sent,user.*,tokens.issued")
    sent = [e for e in evs if e["type"] == "oob.sent"]
    assert [(e["email"], e["requestType"]) for e in sent] == [("ev@example.com", "EMAIL_SIGNIN"), ("ev2@example.com", "EMAIL_SIGNIN")]
    assert sent[0]["oobCode"] == code
    created = [e for e in evs if e["type"] == "user.created"]
    assert {"uid": uid, "email": "ev@example.com", "provider": "emailLink"}.items() <= created[0].items()
    issued = [e for e in evs if e["type"] == "tokens.issued" and e["uid"] == uid]
    assert [e["provider"] for e in issued] == ["password"]
    # The phone user's link shows up as a change of that user, not as a new one.
    assert not any(e["type"] == "user.created" and e.get("email") == "ev2@example.com" for e in evs)
    changed = [e for e in evs if e["type"] in ("user.updated", "user.linked") and e["uid"] == ph["localId"]]
    assert changed, evs


def test_a_restart_keeps_a_pending_code_and_the_users_email_link(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    try:
        privacy_off(a)
        pending = send_link(a, "later@example.com", continue_url="http://localhost:5000/finish?x=1#top")
        r = link_sign_in(a, "now@example.com", send_link(a, "now@example.com")["oobCode"])
        assert r.status_code == 200
        uid = r.json()["localId"]
    finally:
        assert a.stop() == 0
    b = Emulator(["--data-dir", data])
    try:
        privacy_off(b)
        (kept,) = inbox(b, email="later@example.com")
        assert kept["oobCode"] == pending["oobCode"] and kept["requestType"] == "EMAIL_SIGNIN"
        # The link made before the restart (the old port) still names the code and its continue URL.
        old = urllib.parse.urlsplit(pending["oobLink"])
        r = b.session.get(f"{b.url}{old.path}?{old.query}", allow_redirects=False)
        assert r.status_code == 303 and r.headers["Location"].startswith("http://localhost:5000/finish?x=1&mode=signIn")
        assert lookup(b, uid)["emailLinkSignin"] is True and methods(b, "now@example.com") == ["emailLink"]
        r = link_sign_in(b, "later@example.com", pending["oobCode"])
        assert r.status_code == 200 and r.json()["isNewUser"] is True
    finally:
        assert b.stop() == 0


# -- GET /emulator/action --------------------------------------------------------------------------------------------

def test_sign_in_link_redirects_to_its_continue_url_with_the_links_parameters(emu):
    email = unique("go")
    sent = send_link(emu, email, continue_url="http://localhost:5000/finish?x=1&y=a+b&flag#frag")
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 303
    loc = r.headers["Location"]
    # The continue URL's own query (byte for byte) and fragment stay; the link's parameters are appended.
    assert loc == f"http://localhost:5000/finish?x=1&y=a+b&flag&mode=signIn&lang=en&oobCode={sent['oobCode']}&apiKey=fake-api-key#frag"
    assert r.text == f"See Other. Redirecting to {loc}" and r.headers["Content-Type"].startswith("text/plain")
    assert r.headers["Cache-Control"] == "no-store"
    # Following it uses nothing up: the app signs in with the code from the landing URL.
    q = query_of(loc)
    assert link_sign_in(emu, email, q["oobCode"][0]).status_code == 200
    # Now used: the link says so instead of leading on.
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 400 and page(r) == {"error": "Your request to sign in has expired or the link has already been used.",
                                                "instructions": "Try signing in again."}


def test_a_link_parameter_in_the_continue_url_is_replaced_not_repeated(emu):
    sent = send_link(emu, unique(), continue_url="https://app.example.com/in?mode=old&lang=xx&keep=1")
    loc = follow(emu, sent["oobLink"]).headers["Location"]
    assert loc == f"https://app.example.com/in?mode=signIn&lang=en&keep=1&oobCode={sent['oobCode']}&apiKey=fake-api-key"


def test_a_crafted_continue_url_is_not_followed(emu):
    """Deliberately unlike the official emulator (which redirects to any continueUrl, code or not): no open redirect."""
    sent = send_link(emu, unique(), continue_url="http://localhost/mine")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(sent["oobLink"]).query))
    for evil in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        r = action(emu, {**q, "continueUrl": evil})
        assert r.status_code == 303 and r.headers["Location"].startswith("http://localhost/mine?"), r.headers
        assert "evil" not in r.headers["Location"] and "javascript" not in r.headers["Location"]
    # A code made without a continue URL leads nowhere, whatever the request says.
    bare = send_link(emu, unique())
    r = action(emu, {**dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(bare["oobLink"]).query)), "continueUrl": "https://evil.example/"})
    assert r.status_code == 400 and page(r) == {"error": "Missing continueUrl query parameter",
                                                "instructions": "To sign in, append &continueUrl=YOUR_APP_URL to the link."}
    # An unknown code neither.
    r = action(emu, {"mode": "signIn", "oobCode": "bogus", "apiKey": "fake-api-key", "continueUrl": "https://evil.example/"})
    assert r.status_code == 400 and "Location" not in r.headers
    # A code of another purpose with mode=signIn neither.
    email = unique()
    register(emu, email)
    reset = send_link(emu, email, requestType="PASSWORD_RESET", continue_url="http://localhost/reset-done")
    r = follow(emu, reset["oobLink"].replace("mode=resetPassword", "mode=signIn"))
    assert r.status_code == 400 and "Location" not in r.headers


def test_a_tenant_link_carries_its_tenant(emu):
    tid = new_tenant(emu, enableEmailLinkSignin=True)
    email = unique("t")
    sent = send_link(emu, email, tenant=tid, continue_url="http://localhost/t")
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 303
    assert r.headers["Location"] == f"http://localhost/t?mode=signIn&lang=en&oobCode={sent['oobCode']}&apiKey=fake-api-key&tenantId={tid}"
    assert link_sign_in(emu, email, sent["oobCode"], tenantId=tid).status_code == 200


def test_action_error_pages(emu):
    r = action(emu, {"mode": "signIn", "oobCode": "x"})
    assert r.status_code == 400 and page(r) == {"error": "missing apiKey query parameter",
                                                "instructions": "Please modify the URL to specify an apiKey, such as ...&apiKey=YOUR_API_KEY"}
    r = action(emu, {"mode": "signIn", "apiKey": "k"})
    assert r.status_code == 400 and page(r) == {"error": "missing oobCode query parameter",
                                                "instructions": "Please modify the URL to specify an oobCode, such as ...&oobCode=YOUR_OOB_CODE"}
    for mode in ("nope", "", "SIGNIN"):
        r = action(emu, {"mode": mode, "oobCode": "x", "apiKey": "k"})
        assert r.status_code == 400 and page(r) == {"error": "Invalid mode"}
    r = action(emu, {"oobCode": "x", "apiKey": "k"})
    assert r.status_code == 400 and page(r) == {"error": "Invalid mode"}


def test_reset_password_pages(emu):
    email = unique("reset")
    register(emu, email)
    sent = send_link(emu, email, requestType="PASSWORD_RESET")
    template = sent["oobLink"] + "&newPassword=NEW_PASSWORD_HERE"
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 400 and page(r) == {
        "error": "missing newPassword query parameter",
        "instructions": f"To reset the password for {email}, send an HTTP GET request to the following URL.",
        "instructions2": "You may use a web browser or any HTTP client, such as curl.", "urlTemplate": template}
    r = follow(emu, sent["oobLink"], newPassword="NEW_PASSWORD_HERE")
    assert r.status_code == 400 and page(r) == {
        "error": "newPassword must be something other than 'NEW_PASSWORD_HERE'",
        "instructions": "The string 'NEW_PASSWORD_HERE' is just a placeholder.",
        "instructions2": "Please change the URL to specify a new password instead.", "urlTemplate": template}
    r = follow(emu, sent["oobLink"], newPassword="abc")
    assert r.status_code == 400 and error_message(r) == "WEAK_PASSWORD : Password should be at least 6 characters"
    r = follow(emu, sent["oobLink"], newPassword="brand-new-pw")
    assert r.status_code == 200 and page(r) == {"success": "The password has been successfully updated.", "email": email}
    assert emu.itk("signInWithPassword", {"email": email, "password": "brand-new-pw"}).status_code == 200
    r = follow(emu, sent["oobLink"], newPassword="brand-new-pw")
    assert r.status_code == 400 and page(r) == {"error": "Your request to reset your password has expired or the link has already been used.",
                                                "instructions": "Try resetting your password again."}
    # With a continue URL: the reset happens, then 303 to it unmodified.
    cont = send_link(emu, email, requestType="PASSWORD_RESET", continue_url="http://localhost/after-reset?z=1#f")
    r = follow(emu, cont["oobLink"], newPassword="second-new-pw")
    assert r.status_code == 303 and r.headers["Location"] == "http://localhost/after-reset?z=1#f"
    assert emu.itk("signInWithPassword", {"email": email, "password": "second-new-pw"}).status_code == 200
    # An email-link code is no reset code.
    link = send_link(emu, email)
    r = follow(emu, link["oobLink"].replace("mode=signIn", "mode=resetPassword"), newPassword="third-new-pw")
    assert r.status_code == 400 and page(r)["error"].startswith("Your request to reset your password has expired")


def test_verify_email_pages(emu):
    email = unique("verify")
    user = register(emu, email)
    sent = send_link(emu, email, requestType="VERIFY_EMAIL")
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 200 and page(r) == {"success": "The email has been successfully verified.", "email": email}
    assert lookup(emu, user["localId"])["emailVerified"] is True
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 400 and page(r) == {"error": "Your request to verify your email has expired or the link has already been used.",
                                                "instructions": "Try verifying your email again."}
    cont = send_link(emu, email, requestType="VERIFY_EMAIL", continue_url="http://localhost/verified#f")
    r = follow(emu, cont["oobLink"])
    assert r.status_code == 303 and r.headers["Location"] == "http://localhost/verified#f"
    # The wrong mode for a code is its mode's expired page.
    link = send_link(emu, email)
    r = follow(emu, link["oobLink"].replace("mode=signIn", "mode=verifyEmail"))
    assert r.status_code == 400 and page(r)["error"].startswith("Your request to verify your email has expired")
    assert link_sign_in(emu, email, link["oobCode"]).status_code == 200, "not used up by the refusal"


def test_verify_and_change_email_and_recover_email_pages(emu):
    email, new = unique("old"), unique("new")
    user = register(emu, email)
    r = emu.itk("sendOobCode", {"requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": user["idToken"], "newEmail": new, "returnOobLink": True},
                key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    sent = r.json()
    # recoverEmail: no flow here sends such a code, so a pending code of another kind is a mismatch.
    r = follow(emu, sent["oobLink"].replace("mode=verifyAndChangeEmail", "mode=recoverEmail"))
    assert r.status_code == 400 and page(r) == {
        "error": "Requested mode does not match the OOB code provided.",
        "instructions": "If you're trying to test the reverting email flow, try changing the email again to generate a new link."}
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 200 and page(r) == {"success": "The email has been successfully changed.", "newEmail": new}
    assert lookup(emu, user["localId"])["email"] == new
    r = follow(emu, sent["oobLink"])
    assert r.status_code == 400 and page(r) == {"error": "Your request to change your email has expired or the link has already been used.",
                                                "instructions": "Try changing your email again."}
    r = follow(emu, sent["oobLink"].replace("mode=verifyAndChangeEmail", "mode=recoverEmail"))
    assert r.status_code == 400 and page(r)["error"] == "Your request to revert your email has expired or the link has already been used."


# -- hostile input ----------------------------------------------------------------------------------------------------

def test_a_megabyte_continue_url_is_refused_and_stores_nothing(emu):
    email = unique("big")
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": "http://localhost/" + "a" * 1_000_000})
    assert r.status_code == 400 and error_message(r).startswith("INVALID_CONTINUE_URI"), r.text[:300]
    assert inbox(emu, email=email) == []
    # A long but reasonable one is fine, and leads on.
    ok = "http://localhost/" + "b" * 1900
    sent = send_link(emu, email, continue_url=ok)
    assert follow(emu, sent["oobLink"]).headers["Location"].startswith(ok + "?mode=signIn")
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": "http://localhost/" + "é" * 2000})
    assert r.status_code == 400 and error_message(r).startswith("INVALID_CONTINUE_URI")
    assert emu.session.get(emu.url + "/").status_code == 200


@pytest.mark.parametrize("url", ["http://localhost/\r\nSet-Cookie: x=1", "http://localhost/\u0000", "http://local\thost/",
                                 "http://localhost/\u2028x", "http://localhost/\u0085"])
def test_control_characters_in_a_continue_url(emu, url):
    email = unique("ctl")
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": url})
    assert r.status_code == 400 and "INVALID_CONTINUE_URI" in error_message(r)
    assert inbox(emu, email=email) == []


@pytest.mark.parametrize("email", ["a\u0000b@example.com", "a\r\nb@example.com", "a b@example.com", "@example.com", "a@", "x" * 300 + "@example.com",
                                   "a@exa\u0085mple.com"])
def test_bad_emails_are_invalid_email(emu, email):
    r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email})
    assert r.status_code == 400 and error_message(r) == "INVALID_EMAIL"
    r = link_sign_in(emu, email, "x")
    assert r.status_code == 400 and error_message(r) == "INVALID_EMAIL"


@pytest.mark.parametrize("body", [{"email": 5, "oobCode": "x"}, {"email": ["a@example.com"], "oobCode": "x"}, {"email": "a@example.com", "oobCode": {}},
                                  {"email": "a@example.com", "oobCode": "x" * 100_000}, {"email": "a@example.com", "oobCode": "x", "idToken": 7},
                                  {"email": "a@example.com", "oobCode": "x", "tenantId": "bad/tenant"}])
def test_wrong_types_get_the_envelope(emu, body):
    r = emu.itk("signInWithEmailLink", body)
    assert r.status_code == 400 and r.json()["error"]["code"] == 400 and r.json()["error"]["message"], r.text[:300]


def test_unicode_emails(emu):
    email = f"ü{uuid.uuid4().hex[:6]}@exämple.com"
    sent = send_link(emu, email.upper(), continue_url="http://localhost/ünï?q=é#frä")
    assert sent["email"] == email, "lowercased, Unicode-aware"
    (code,) = inbox(emu, email=email)
    assert code["oobCode"] == sent["oobCode"]
    # The redirect is plain ASCII: the continue URL's path, query and fragment percent-encoded, as a browser sends them.
    loc = follow(emu, sent["oobLink"]).headers["Location"]
    assert loc.isascii(), loc
    assert loc == f"http://localhost/%C3%BCn%C3%AF?q=%C3%A9&mode=signIn&lang=en&oobCode={sent['oobCode']}&apiKey=fake-api-key#fr%C3%A4"
    r = link_sign_in(emu, email.upper(), sent["oobCode"])
    assert r.status_code == 200 and r.json()["email"] == email
    assert claims_of(r.json()["idToken"])["email"] == email and methods(emu, email) == ["emailLink"]


def test_hostile_action_queries(emu):
    sent = send_link(emu, unique(), continue_url="http://localhost/x")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(sent["oobLink"]).query))
    # Control characters, CRLF, NUL and Unicode in the parameters the redirect copies never reach the header raw.
    r = action(emu, {**q, "extra": "a\r\nSet-Cookie: x=1", "lang": "\u0000ü"})
    assert r.status_code == 303 and "Set-Cookie" not in r.headers
    assert r.headers["Location"].isascii() and "\r" not in r.headers["Location"] and "%0D%0A" in r.headers["Location"]
    for params in ({"mode": "signIn\r\n", "oobCode": "x", "apiKey": "k"}, {"mode": "signIn", "oobCode": "\u0000" * 10, "apiKey": "k"},
                   {"mode": "signIn", "oobCode": "x" * 30_000, "apiKey": "k"}, {"mode": "signIn", "oobCode": "x", "apiKey": "k", "tenantId": "../../etc"},
                   {"mode": "resetPassword", "oobCode": "x", "apiKey": "k", "newPassword": "\u0000" * 100}):
        r = action(emu, params)
        assert r.status_code == 400 and r.json(), params
    assert emu.session.get(emu.url + "/").status_code == 200


# -- firebase-admin (Python) ------------------------------------------------------------------------------------------

def test_admin_generate_sign_in_with_email_link(admin):
    from firebase_admin import auth
    emu, app = admin
    privacy_off(emu)
    settings = auth.ActionCodeSettings(url="https://app.example.com/finish?cart=42", handle_code_in_app=True,
                                       ios_bundle_id="com.example.ios", android_package_name="com.example.android",
                                       android_install_app=True, android_minimum_version="12")
    link = auth.generate_sign_in_with_email_link("Ada@Example.com", settings, app=app)
    assert link.startswith(emu.url + "/emulator/action?mode=signIn&lang=en&oobCode=")
    (code,) = inbox(emu, email="ada@example.com")
    assert code["oobLink"] == link and code["requestType"] == "EMAIL_SIGNIN"
    r = follow(emu, link)
    assert r.status_code == 303
    loc = r.headers["Location"]
    assert loc.startswith("https://app.example.com/finish?cart=42&mode=signIn&lang=en&oobCode=" + code["oobCode"])
    r = link_sign_in(emu, "ada@example.com", query_of(loc)["oobCode"][0])
    assert r.status_code == 200 and r.json()["isNewUser"] is True
    user = auth.get_user_by_email("ada@example.com", app=app)
    assert user.uid == r.json()["localId"] and user.email_verified is True
    assert [p.provider_id for p in user.provider_data] == ["password"]
    assert auth.verify_id_token(r.json()["idToken"], app=app)["firebase"]["sign_in_provider"] == "password"
    with pytest.raises(ValueError):  # checked by the library before any request
        auth.generate_sign_in_with_email_link("not-an-email", settings, app=app)


def test_admin_generate_reset_and_verification_links_with_settings(admin):
    from firebase_admin import auth
    emu, app = admin
    u = auth.create_user(email="bo@example.com", password="secret-bo", app=app)
    settings = auth.ActionCodeSettings(url="http://localhost:5000/after?x=1")
    reset = auth.generate_password_reset_link("bo@example.com", settings, app=app)
    assert "mode=resetPassword" in reset and "continueUrl=http%3A%2F%2Flocalhost%3A5000%2Fafter%3Fx%3D1" in reset
    r = follow(emu, reset, newPassword="secret-new")
    assert r.status_code == 303 and r.headers["Location"] == "http://localhost:5000/after?x=1"
    assert emu.itk("signInWithPassword", {"email": "bo@example.com", "password": "secret-new"}).status_code == 200
    verify = auth.generate_email_verification_link("bo@example.com", settings, app=app)
    r = follow(emu, verify)
    assert r.status_code == 303 and r.headers["Location"] == "http://localhost:5000/after?x=1"
    assert auth.get_user(u.uid, app=app).email_verified is True
    # Without settings: the pages say what happened.
    verify = auth.generate_email_verification_link("bo@example.com", app=app)
    r = follow(emu, verify)
    assert r.status_code == 200 and page(r)["success"] == "The email has been successfully verified."
    with pytest.raises(auth.EmailNotFoundError):
        auth.generate_password_reset_link("nobody@example.com", settings, app=app)


# -- the real JS SDK ---------------------------------------------------------------------------------------------------

def run_driver(emu, *args, env=None, url=None):
    r = subprocess.run(["node", JS_DRIVER, *args], env={**os.environ, "EMULATOR_URL": url or emu.url, **(env or {})},
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not HAVE_JS, reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_email_link_flows(fresh):
    emu = fresh()
    s = run_driver(emu, "js")["steps"]
    new = s["newUser"]
    assert new["isLink"] and new["isLanding"] and not new["isOther"]
    assert new["hop"]["status"] == 303 and new["hop"]["location"].startswith("http://localhost:5000/finish?from=mail&mode=signIn&lang=en&oobCode=")
    assert new["hop"]["location"].endswith("&apiKey=fake-api-key#top")
    assert (new["isNewUser"], new["email"], new["emailVerified"], new["isAnonymous"]) == (True, "js-new@example.com", True, False)
    assert (new["providerData"], new["signInProvider"], new["infoProviderId"], new["operationType"]) == (["password"], "password", "password", "signIn")
    assert s["reuse"]["error"] == s["reuseUsedLink"]["error"] == "auth/invalid-action-code"
    pw = s["existingPasswordUser"]
    assert pw["sameUser"] and pw["isNewUser"] is False and pw["methods"] == ["password", "emailLink"] and pw["emailVerified"]
    ph = s["linkOntoPhoneUser"]
    assert ph.get("error") is None, ph
    assert ph["sameUser"] and ph["operationType"] == "link" and ph["credSignInMethod"] == "emailLink"
    assert ph["providerData"] == ["password", "phone"] and ph["phoneNumber"] == FICTIONAL and ph["email"] == "js-phone@example.com"
    assert ph["methods"] == ["emailLink"]
    re = s["reauthenticate"]
    assert re["sameUser"] and re["operationType"] == "reauthenticate" and re["mismatch"] == "auth/user-mismatch" and re["stillSignedIn"]
    assert s["methods"] == {"fresh": ["emailLink"], "unknown": []}
    assert s["wrongEmail"] == {"wrong": "auth/invalid-email", "thenSignedIn": "js-other@example.com"}
    assert s["tamperedCode"]["error"] == "auth/invalid-action-code"
    assert s["badEmailToSend"]["error"] == "auth/invalid-email"
    assert s["expired"] == {"clock": 200, "error": "auth/expired-action-code"}
    t = s["tenant"]
    assert t.get("error") is None, t
    assert t["linkHasTenant"] and t["mismatch"] == "auth/tenant-id-mismatch" and t["projectInbox"] == 0
    assert t["tenantId"] == t["tid"] == t["tokenTenant"] and t["isNewUser"] is True
    assert s["tenantOff"]["error"] == "auth/operation-not-allowed"


@pytest.mark.skipif(not HAVE_JS, reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_signs_in_with_an_admin_made_link(admin):
    from firebase_admin import auth
    emu, app = admin
    link = auth.generate_sign_in_with_email_link("grace@example.com", auth.ActionCodeSettings(url="http://localhost/done", handle_code_in_app=True), app=app)
    out = run_driver(emu, "--consume", "grace@example.com", link)
    assert out["isLink"] is True and out["email"] == "grace@example.com" and out["isNewUser"] is True and out["emailVerified"] is True
    assert auth.get_user_by_email("grace@example.com", app=app).uid == out["uid"]


# -- a real browser -----------------------------------------------------------------------------------------------------

LANDING = """<!doctype html><html><head><meta charset="utf-8"><title>landing</title></head><body><pre id="out">running</pre>
<script>
const q = new URLSearchParams(location.search);
document.getElementById("out").textContent = JSON.stringify({path: location.pathname, hash: location.hash,
  mode: q.get("mode"), oobCode: q.get("oobCode"), apiKey: q.get("apiKey"), lang: q.get("lang"), from: q.get("from"), href: location.href});
</script></body></html>"""


def serve_landing():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            send_body(self, 200, LANDING.encode(), "text/html; charset=utf-8")

        def log_message(self, *a):
            pass

    return serve_in_background(Handler)


@pytest.mark.skipif(not HAVE_BROWSER, reason="needs chromium, chromium-driver and selenium")
def test_a_browser_follows_the_link_to_the_app_and_the_app_signs_in(emu):
    from selenium.webdriver.support.ui import WebDriverWait
    server = serve_landing()
    driver = headless_chromium()
    try:
        email = unique("browser")
        cont = f"http://localhost:{server.server_address[1]}/finishSignIn?from=mail#section-2"
        sent = send_link(emu, email, continue_url=cont)
        driver.get(sent["oobLink"])
        WebDriverWait(driver, 30).until(lambda d: d.find_element("id", "out").text != "running")
        seen = json.loads(driver.find_element("id", "out").text)
        assert seen["path"] == "/finishSignIn" and seen["hash"] == "#section-2" and seen["from"] == "mail"
        assert (seen["mode"], seen["oobCode"], seen["apiKey"], seen["lang"]) == ("signIn", sent["oobCode"], "fake-api-key", "en")
        # What the app does next: signInWithEmailLink with the code it landed with.
        r = link_sign_in(emu, email, seen["oobCode"])
        assert r.status_code == 200 and r.json()["isNewUser"] is True
        # The used link now shows the emulator's page instead of leading on.
        driver.get(sent["oobLink"])
        assert "Your request to sign in has expired or the link has already been used." in driver.page_source
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


def json_page(driver):
    """The action page's JSON as Chromium shows it (a <pre> of the text)."""
    return json.loads(driver.find_element("tag name", "pre").text)["authEmulator"]


@pytest.mark.skipif(not HAVE_BROWSER, reason="needs chromium, chromium-driver and selenium")
def test_a_browser_clicks_the_inbox_links(emu):
    """A person's clicks on the inbox links in Chromium: verify the email (once), reset the password through the form,
    then sign in, landing on the app's continue URL and nowhere else whatever the link is made to say."""
    from selenium.webdriver.support.ui import WebDriverWait
    app, evil = serve_landing(), serve_landing()
    driver = headless_chromium()
    try:
        email = unique("clicks")
        user = register(emu, email)
        # Verify: the client send the SDK's sendEmailVerification makes; its link from the inbox.
        assert emu.itk("sendOobCode", {"requestType": "VERIFY_EMAIL", "idToken": user["idToken"]}).status_code == 200
        (verify,) = inbox(emu, email=email)
        driver.get(verify["oobLink"])
        assert json_page(driver) == {"success": "The email has been successfully verified.", "email": email}
        assert lookup(emu, user["localId"])["emailVerified"] is True
        driver.get(verify["oobLink"])
        assert json_page(driver)["error"] == "Your request to verify your email has expired or the link has already been used."
        # Reset: the link shows a form (a browser asks for text/html); a weak password is refused, a good one saved.
        assert emu.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": email}).status_code == 200
        (reset,) = inbox(emu, email=email)
        driver.get(reset["oobLink"])
        assert driver.title == "Reset your password" and driver.find_element("id", "email").text == email
        driver.find_element("id", "newPassword").send_keys("abc")
        driver.find_element("id", "save").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_elements("tag name", "pre"))
        assert json.loads(driver.find_element("tag name", "pre").text)["error"]["message"] == "WEAK_PASSWORD : Password should be at least 6 characters"
        driver.get(reset["oobLink"])
        driver.find_element("id", "newPassword").send_keys("clicked-new-pw")
        driver.find_element("id", "save").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_elements("tag name", "pre"))
        assert json_page(driver) == {"success": "The password has been successfully updated.", "email": email}
        assert emu.itk("signInWithPassword", {"email": email, "password": "clicked-new-pw"}).status_code == 200
        assert error_message(emu.itk("signInWithPassword", {"email": email, "password": "notasecret"})) == "INVALID_PASSWORD"
        driver.get(reset["oobLink"])
        assert json_page(driver)["error"] == "Your request to reset your password has expired or the link has already been used."
        # A reset with a continue URL: the form's submission lands there.
        cont = f"http://localhost:{app.server_address[1]}/after-reset?from=form"
        r = emu.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": email, "continueUrl": cont})
        assert r.status_code == 200, r.text
        (reset,) = inbox(emu, email=email)
        driver.get(reset["oobLink"])
        driver.find_element("id", "newPassword").send_keys("second-click-pw")
        driver.find_element("id", "save").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_elements("id", "out") and d.find_element("id", "out").text != "running")
        seen = json.loads(driver.find_element("id", "out").text)
        assert seen["path"] == "/after-reset" and seen["from"] == "form" and seen["mode"] is None
        assert emu.itk("signInWithPassword", {"email": email, "password": "second-click-pw"}).status_code == 200
        # Sign in: a link made to name another continue URL still lands on the code's own.
        cont = f"http://localhost:{app.server_address[1]}/finishSignIn?from=mail"
        r = emu.itk("sendOobCode", {"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": cont, "canHandleCodeInApp": True})
        assert r.status_code == 200, r.text
        (sign_in,) = inbox(emu, email=email)
        crafted = sign_in["oobLink"].replace("continueUrl=", "continueUrl=" + urllib.parse.quote(
            f"http://127.0.0.1:{evil.server_address[1]}/evil", safe="") + "&x=")
        for link in (crafted, sign_in["oobLink"] + "&continueUrl=" + urllib.parse.quote(f"http://127.0.0.1:{evil.server_address[1]}/evil", safe="")):
            driver.get(link)
            WebDriverWait(driver, 30).until(lambda d: d.find_elements("id", "out") and d.find_element("id", "out").text != "running")
            seen = json.loads(driver.find_element("id", "out").text)
            assert seen["href"].startswith(f"http://localhost:{app.server_address[1]}/finishSignIn?from=mail&"), seen
            assert (seen["mode"], seen["oobCode"]) == ("signIn", sign_in["oobCode"])
        r = link_sign_in(emu, email, seen["oobCode"])
        assert r.status_code == 200 and r.json()["localId"] == user["localId"]
        driver.get(sign_in["oobLink"])
        assert json_page(driver)["error"] == "Your request to sign in has expired or the link has already been used."
    finally:
        driver.quit()
        for s in (app, evil):
            s.shutdown()
            s.server_close()


# -- firebase-admin (Node) ---------------------------------------------------------------------------------------------

NODE_ADMIN = os.environ.get("FIREBASE_ADMIN_NODE_DIR")  # a folder with node_modules/firebase-admin
ADMIN_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "admin_email_link.cjs")


@pytest.mark.skipif(not HAVE_JS or not NODE_ADMIN, reason="needs FIREBASE_SDK_DIR, FIREBASE_ADMIN_NODE_DIR and node")
def test_js_sdk_signs_in_with_a_node_admin_made_link(fresh):
    emu = fresh()
    r = subprocess.run(["node", ADMIN_DRIVER, "Lin@Example.com", "http://localhost:5000/done?x=1"],
                       env={**os.environ, "FIREBASE_AUTH_EMULATOR_HOST": emu.host_port}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    made = json.loads(r.stdout.strip().splitlines()[-1])
    assert made["badEmail"] == "auth/invalid-email"
    link = made["link"]
    assert link.startswith(emu.url + "/emulator/action?mode=signIn&lang=en&oobCode=")
    assert link.endswith("&apiKey=fake-api-key&continueUrl=http%3A%2F%2Flocalhost%3A5000%2Fdone%3Fx%3D1")
    (code,) = inbox(emu, email="lin@example.com")
    assert code["oobLink"] == link
    # The SDK takes the link itself, or the app's landing URL it redirects to.
    landing = follow(emu, link).headers["Location"]
    assert landing == f"http://localhost:5000/done?x=1&mode=signIn&lang=en&oobCode={code['oobCode']}&apiKey=fake-api-key"
    out = run_driver(emu, "--consume", "lin@example.com", landing)
    assert out["isLink"] is True and out["email"] == "lin@example.com" and out["isNewUser"] is True and out["emailVerified"] is True
    assert out["signInProvider"] == "password" and out["providerData"] == ["password"]
    assert lookup(emu, out["uid"])["emailLinkSignin"] is True


# -- the differential against the official emulator ----------------------------------------------------------------------

OFFICIAL = os.environ.get("OFFICIAL_AUTH_EMULATOR_URL")  # e.g. http://127.0.0.1:9399 (firebase-tools' Auth emulator)

# Steps of the driver whose outcome differs on purpose: (the official emulator's, ours). Production is on our side.
DELIBERATE = {
    "badEmailToSend": ({"sent": True}, {"error": "auth/invalid-email"}),                    # production validates the email
    "expired": ({"clock": 404, "signedIn": True}, {"clock": 200, "error": "auth/expired-action-code"}),  # codes last 6 h
}


def comparable(steps, url):
    """The driver's steps without what differs by run (ids, codes, the emulator's address), tenant ids checked."""
    text = json.dumps(steps).replace(url, "EMULATOR")
    text = re.sub(r"oobCode=[A-Za-z0-9_-]+", "oobCode=CODE", text)
    out = json.loads(text)
    t = out["tenant"]
    assert t["tenantId"] == t["tid"] == t["tokenTenant"], t
    for step in out.values():
        for k in ("uid", "tid", "tenantId", "tokenTenant"):
            step.pop(k, None)
    return out


@pytest.mark.skipif(not HAVE_JS or not OFFICIAL, reason="needs FIREBASE_SDK_DIR, node and OFFICIAL_AUTH_EMULATOR_URL")
def test_the_sdk_driver_sees_what_it_sees_on_the_official_emulator(fresh):
    emu = fresh()
    prefix = "diff" + uuid.uuid4().hex[:8]
    env = {"PHONE": "+1555" + str(uuid.uuid4().int % 10_000_000).zfill(7)}
    ours = comparable(run_driver(emu, prefix, env=env)["steps"], emu.url)
    theirs = comparable(run_driver(emu, prefix, env=env, url=OFFICIAL)["steps"], OFFICIAL)
    assert ours.keys() == theirs.keys()
    for name, (official, us) in DELIBERATE.items():
        assert {k: v for k, v in theirs.pop(name).items() if k != "message"} == official, name
        assert {k: v for k, v in ours.pop(name).items() if k != "message"} == us, name
    for name in ours:
        assert ours[name] == theirs[name], name
