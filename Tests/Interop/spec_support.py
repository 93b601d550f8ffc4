"""Helpers for the test_spec_*.py files: the cases of firebase-tools' own Auth-emulator spec files
(src/emulator/auth/*.spec.ts, v14.23), written anew as raw HTTP against the release binary.

The official specs run against project "example" with `?key=fake-api-key` for client calls and `Bearer owner` for
admin calls; `spec_emu` starts our server with `--project example` so the same requests land in the same project.
Where production (and so this emulator) differs from the official emulator, the test says so and asserts production's
answer (docs/differences.md has the row)."""
import json
import uuid

import pytest
import requests

from conftest import Emulator, claims_of, send_json  # noqa: F401  (re-exported for the spec files)

PROJECT_ID = "example"
TEST_PHONE_NUMBER = "+15555550100"
TEST_PHONE_NUMBER_OBFUSCATED = "+*******0100"
TEST_PHONE_NUMBER_2 = "+15555550101"
TEST_PHONE_NUMBER_3 = "+15555550102"
TEST_MFA_INFO = {"displayName": "Cell Phone", "phoneInfo": TEST_PHONE_NUMBER}
TEST_INVALID_PHONE_NUMBER = "5555550100"
DISPLAY_NAME = "Example User"
PHOTO_URL = "http://fakephotourl.test"
OWNER = {"Authorization": "Bearer owner"}
ITK = "/identitytoolkit.googleapis.com/v1"
ITK2 = "/identitytoolkit.googleapis.com/v2"
V3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty"


class Spec:
    """A client for one running server, named after the official spec helpers (testing/helpers.ts)."""

    def __init__(self, emu: Emulator):
        self.emu = emu
        self.url = emu.url
        self.s = requests.Session()

    # -- raw calls ------------------------------------------------------------------------------------------------
    def post(self, path, body=None, key="fake-api-key", owner=False, headers=None, params=None):
        q = dict(params or {})
        if key and not owner:
            q["key"] = key
        h = dict(headers or {})
        if owner:
            h.update(OWNER)
        return self.s.post(self.url + path, json=body if body is not None else {}, params=q, headers=h)

    def raw(self, method, path, **kw):
        return self.s.request(method, self.url + path, **kw)

    def itk(self, op, body=None, **kw):
        return self.post(f"{ITK}/accounts:{op}", body, **kw)

    def v3(self, op, body=None, **kw):
        return self.post(f"{V3}/{op}", body, **kw)

    def admin(self, op, body=None, tenant=None, project=PROJECT_ID):
        base = f"{ITK}/projects/{project}" + (f"/tenants/{tenant}" if tenant else "")
        return self.post(f"{base}/accounts{':' + op if op else ''}", body, owner=True)

    # -- helpers as testing/helpers.ts ----------------------------------------------------------------------------
    def register_user(self, **user):
        r = self.itk("signUp", user)
        assert r.status_code == 200, r.text
        return r.json()

    def register_anon_user(self, tenant_id=None):
        body = {"returnSecureToken": True}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.itk("signUp", body)
        assert r.status_code == 200, r.text
        return r.json()

    def sign_in_with_password(self, email, password, mfa_pending=False, tenant_id=None):
        body = {"email": email, "password": password}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.itk("signInWithPassword", body)
        assert r.status_code == 200, r.text
        j = r.json()
        if mfa_pending:
            assert "mfaPendingCredential" in j, j
        return j

    def inbox(self, name, tenant_id=None):
        """An emulator inbox (`verificationCodes`, `oobCodes`) of the project or a tenant."""
        path = f"/emulator/v1/projects/{PROJECT_ID}" + (f"/tenants/{tenant_id}" if tenant_id else "") + "/" + name
        r = self.s.get(self.url + path)
        assert r.status_code == 200, r.text
        return r.json()[name]

    def verification_codes(self, tenant_id=None):
        return self.inbox("verificationCodes", tenant_id)

    def code_for_session(self, session, tenant_id=None):
        return [c for c in self.verification_codes(tenant_id) if c["sessionInfo"] == session][0]["code"]

    def oobs(self, tenant_id=None):
        return self.inbox("oobCodes", tenant_id)

    def sign_in_with_phone(self, phone, tenant_id=None):
        body = {"phoneNumber": phone, "recaptchaToken": "ignored"}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.itk("sendVerificationCode", body)
        assert r.status_code == 200, r.text
        session = r.json()["sessionInfo"]
        body = {"sessionInfo": session, "code": self.code_for_session(session, tenant_id)}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.itk("signInWithPhoneNumber", body)
        assert r.status_code == 200, r.text
        return r.json()

    def lookup(self, id_token, tenant_id=None):
        body = {"idToken": id_token}
        if tenant_id:
            body["tenantId"] = tenant_id
        return self.itk("lookup", body)

    def account_by_id_token(self, id_token, tenant_id=None):
        r = self.lookup(id_token, tenant_id)
        assert r.status_code == 200, r.text
        assert len(r.json().get("users", [])) == 1
        return r.json()["users"][0]

    def account_by_local_id(self, local_id, tenant_id=None):
        body = {"localId": [local_id]}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.itk("lookup", body, owner=True)
        assert r.status_code == 200, r.text
        assert len(r.json().get("users", [])) == 1, r.text
        return r.json()["users"][0]

    def expect_user_not_exists(self, id_token, tenant_id=None):
        assert err(self.lookup(id_token, tenant_id)) == (400, "USER_NOT_FOUND")

    def update_account_by_local_id(self, local_id, **fields):
        r = self.itk("update", {"localId": local_id, **fields}, owner=True)
        assert r.status_code == 200, r.text
        return r.json()

    def enroll_phone_mfa(self, id_token, phone, tenant_id=None):
        body = {"idToken": id_token, "phoneEnrollmentInfo": {"phoneNumber": phone}}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.post(f"{ITK2}/accounts/mfaEnrollment:start", body)
        assert r.status_code == 200, r.text
        session = r.json()["phoneSessionInfo"]["sessionInfo"]
        body = {"idToken": id_token, "phoneVerificationInfo": {"code": self.code_for_session(session, tenant_id), "sessionInfo": session}}
        if tenant_id:
            body["tenantId"] = tenant_id
        r = self.post(f"{ITK2}/accounts/mfaEnrollment:finalize", body)
        assert r.status_code == 200, r.text
        return r.json()

    def register_tenant(self, project=PROJECT_ID, **tenant):
        r = self.post(f"{ITK2}/projects/{project}/tenants", tenant, owner=True)
        assert r.status_code == 200, r.text
        return r.json()

    def update_config(self, config, mask=None, project=PROJECT_ID):
        r = self.s.patch(f"{self.url}{ITK2}/projects/{project}/config", json=config, headers=OWNER,
                         params={"updateMask": mask} if mask else {})
        assert r.status_code == 200, r.text
        return r.json()

    def emulator_config(self, config, project=PROJECT_ID):
        r = self.s.patch(f"{self.url}/emulator/v1/projects/{project}/config", json=config, headers=OWNER)
        assert r.status_code == 200, r.text
        return r.json()

    def legacy_email_errors(self):
        """The official emulator's default (enableImprovedEmailPrivacy false): EMAIL_NOT_FOUND / INVALID_PASSWORD."""
        self.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": False}}, "emailPrivacyConfig")

    def reset(self):
        r = self.s.delete(f"{self.url}/emulator/v1/projects/{PROJECT_ID}/accounts")
        assert r.status_code == 200, r.text


def err(resp):
    """(status, message) of an error answer."""
    try:
        return resp.status_code, resp.json()["error"]["message"]
    except (ValueError, KeyError):
        return resp.status_code, resp.text


def email():
    return f"u{uuid.uuid4().hex[:10]}@example.com"


def start_spec_server(*args):
    return Emulator(("--project", PROJECT_ID, *args))


@pytest.fixture(scope="module")
def spec():
    e = start_spec_server()
    yield Spec(e)
    assert e.stop() == 0


def decode(token):
    return claims_of(token)


def header_of(token):
    import base64
    p = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))


# -- blocking functions: the official specs stub them with nock; here a real loopback HTTP server answers -----------
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402


class BlockingFunction:
    """A loopback function server: `answer(path, status, body)` sets what a path replies; `calls` lists the JWT
    payloads received (decoded without verification, as firebase-functions does in emulator mode)."""

    def __init__(self):
        self.answers = {}
        self.calls = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                outer.calls.append((self.path, claims_of(body["data"]["jwt"])))
                send_json(self, *outer.answers.get(self.path, (200, {})))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def answer(self, path, status, body):
        self.answers[path] = (status, body)

    def paths(self):
        return [p for p, _ in self.calls]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def blocking(spec):
    """A function server, and a function to configure triggers ({"beforeCreate": "/beforeCreate", …}) on the
    project; the triggers are removed afterwards."""
    fn = BlockingFunction()

    def configure(*triggers, tenant=None):
        body = {"blockingFunctions": {"triggers": {t: {"functionUri": fn.base + "/" + t} for t in triggers}}}
        if tenant:
            r = spec.s.patch(f"{spec.url}{ITK2}/projects/{PROJECT_ID}/tenants/{tenant}", json=body, headers=OWNER,
                             params={"updateMask": "blockingFunctions"})
            assert r.status_code == 200, r.text
        else:
            spec.update_config(body, "blockingFunctions")

    fn.configure = configure
    yield fn
    spec.update_config({"blockingFunctions": {}}, "blockingFunctions")
    fn.close()


def sign_in_with_email_link(spec, addr, tenant_id=None):
    """testing/helpers.ts signInWithEmailLink: an EMAIL_SIGNIN code minted by the admin, then the sign-in."""
    body = {"email": addr, "requestType": "EMAIL_SIGNIN", "returnOobLink": True}
    if tenant_id:
        body["tenantId"] = tenant_id
    r = spec.itk("sendOobCode", body, owner=True)
    assert r.status_code == 200, r.text
    body = {"email": addr, "oobCode": r.json()["oobCode"]}
    if tenant_id:
        body["tenantId"] = tenant_id
    r = spec.itk("signInWithEmailLink", body)
    assert r.status_code == 200, r.text
    return r.json()


def has_error(resp, code):
    """A 400 whose message contains `code` (the official specs' `.includes` checks)."""
    status, message = err(resp)
    return status == 400 and code in message


@pytest.fixture
def legacy(spec):
    """Email enumeration protection off (the official emulator's default) for one test."""
    spec.legacy_email_errors()
    yield
    spec.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}}, "emailPrivacyConfig")


def sign_in_methods(spec, addr):
    """testing/helpers.ts getSigninMethods: createAuthUri's signinMethods (told with protection off)."""
    spec.legacy_email_errors()
    try:
        r = spec.itk("createAuthUri", {"continueUri": "http://example.com/", "identifier": addr})
        assert r.status_code == 200, r.text
        return r.json().get("signinMethods", [])
    finally:
        spec.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}}, "emailPrivacyConfig")


def fake_idp(spec, sub, addr=None, provider="google.com"):
    """testing/helpers.ts signInWithFakeClaims: signInWithIdp with the official emulator's fake id_token JSON."""
    import urllib.parse
    claims = {"iss": "example.com", "aud": "example.com", "exp": 1597974008, "iat": 1597970408, "sub": sub}
    if addr:
        claims["email"] = addr
    r = spec.itk("signInWithIdp", {"postBody": f"providerId={provider}&id_token=" + urllib.parse.quote(json.dumps(claims)),
                                   "requestUri": "http://localhost", "returnIdpCredential": True, "returnSecureToken": True})
    assert r.status_code == 200, r.text
    return r.json()


# The blocking-function answers the official specs give (displayName, photoUrl, emailVerified, claims).
MODIFIED = {"displayName": DISPLAY_NAME, "photoUrl": PHOTO_URL, "emailVerified": True, "customClaims": {"customAttribute": "custom"}}


def answer_modified(fn, trigger, session=False):
    mask = "displayName,photoUrl,emailVerified,customClaims" + (",sessionClaims" if session else "")
    record = {"updateMask": mask, **MODIFIED}
    if session:
        record["sessionClaims"] = {"sessionAttribute": "session"}
    fn.answer("/" + trigger, 200, {"userRecord": record})


def answer_old_then_new(fn):
    """beforeCreate sets old values, beforeSignIn the final ones (`beforeSignIn fields should overwrite beforeCreate`)."""
    fn.configure("beforeCreate", "beforeSignIn")
    fn.answer("/beforeCreate", 200, {"userRecord": {"updateMask": "displayName,photoUrl,emailVerified,customClaims",
                                                    "displayName": "oldDisplayName", "photoUrl": "oldPhotoUrl", "emailVerified": False,
                                                    "customClaims": {"customAttribute": "oldCustom"}}})
    answer_modified(fn, "beforeSignIn", session=True)


def expect_modified_claims(c, session=False):
    assert c["name"] == DISPLAY_NAME and c["picture"] == PHOTO_URL and c["email_verified"] is True, c
    assert c["customAttribute"] == "custom"
    if session:
        assert c["sessionAttribute"] == "session"


def blocking_sign_up_cases(sign_in, expect):
    """The four blocking-function cases signUp.spec.ts and phone.spec.ts share, for one sign-up flow: `sign_in(spec)`
    makes the new user, `expect(resp, session=…)` checks the modified answer. Assign the result to four test_ names."""
    def before_create_modifies(spec, blocking):
        blocking.configure("beforeCreate")
        answer_modified(blocking, "beforeCreate")
        expect(sign_in(spec))
        assert blocking.paths() == ["/beforeCreate"]

    def before_sign_in_modifies(spec, blocking):
        blocking.configure("beforeSignIn")
        answer_modified(blocking, "beforeSignIn", session=True)
        expect(sign_in(spec), session=True)

    def before_sign_in_overwrites_before_create(spec, blocking):
        answer_old_then_new(blocking)
        expect(sign_in(spec), session=True)
        assert blocking.paths() == ["/beforeCreate", "/beforeSignIn"]

    def before_create_disables(spec, blocking):
        blocking.configure("beforeCreate")
        blocking.answer("/beforeCreate", 200, {"userRecord": {"updateMask": "disabled", "disabled": True}})
        assert err(sign_in(spec)) == (400, "USER_DISABLED")

    return before_create_modifies, before_sign_in_modifies, before_sign_in_overwrites_before_create, before_create_disables
