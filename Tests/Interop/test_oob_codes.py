"""The official emulator's oob.spec.ts (accounts:sendOobCode, and resetPassword / update redeeming the codes), written
anew over plain HTTP against the release binary — and, with OFFICIAL_AUTH_EMULATOR_URL set, the same tests against
the official emulator, so each expectation is checked on both (where we differ on purpose the test says so).

Every test uses its own emails and tenants, so one official emulator serves them all; its inbox is filtered by email."""
import os
import time
import uuid

import pytest
import requests

from conftest import Emulator

OWNER = {"Authorization": "Bearer owner"}
P = "demo-phone"
OFFICIAL = os.environ.get("OFFICIAL_AUTH_EMULATOR_URL")  # e.g. http://127.0.0.1:9399 (firebase-tools' Auth emulator)


class Target:
    """One emulator under test: ours (a fresh release binary) or the official one."""

    def __init__(self, url, emu=None):
        self.url, self.emu, self.official = url, emu, emu is None
        self.session = requests.Session()

    def post(self, path, body, key="fake-api-key", headers=None):
        return self.session.post(self.url + path, json=body, params={"key": key} if key else {}, headers=headers or {})

    def itk(self, op, body, admin=False):
        """accounts:<op> as a client (API key) or, with admin, with OAuth (`Bearer owner`)."""
        return self.post(f"/identitytoolkit.googleapis.com/v1/accounts:{op}", body, key=None if admin else "fake-api-key",
                         headers=OWNER if admin else None)

    def inbox(self, email, tenant=None):
        path = f"/emulator/v1/projects/{P}" + (f"/tenants/{tenant}" if tenant else "") + "/oobCodes"
        r = self.session.get(self.url + path)
        assert r.status_code == 200, r.text
        return [c for c in r.json()["oobCodes"] if c["email"] == email]

    def register(self, email, password="notasecret"):
        r = self.itk("signUp", {"email": email, "password": password, "returnSecureToken": True})
        assert r.status_code == 200, r.text
        return r.json()

    def tenant(self, **body):
        r = self.session.post(f"{self.url}/identitytoolkit.googleapis.com/v2/projects/{P}/tenants", json=body, headers=OWNER)
        assert r.status_code == 200, r.text
        return r.json()["tenantId"]

    def privacy(self, on):
        r = self.session.patch(f"{self.url}/identitytoolkit.googleapis.com/v2/projects/{P}/config", params={"updateMask": "emailPrivacyConfig"},
                               json={"emailPrivacyConfig": {"enableImprovedEmailPrivacy": on}}, headers=OWNER)
        assert r.status_code == 200, r.text

    def later(self, seconds):
        """Let `seconds` pass: our emulator clock moves; the official emulator has none (real time passes)."""
        if self.official:
            time.sleep(seconds)
        else:
            assert self.session.post(self.url + "/emulator/v1/clock:advance", json={"seconds": seconds}).status_code == 200


@pytest.fixture(params=["ours", "official"])
def t(request, fresh):
    if request.param == "official":
        if not OFFICIAL:
            pytest.skip("needs OFFICIAL_AUTH_EMULATOR_URL")
        target = Target(OFFICIAL.rstrip("/"))
        target.privacy(False)
        yield target
        return
    emu: Emulator = fresh()
    target = Target(emu.url, emu)
    target.privacy(False)  # the official emulator's default (ours is production's: on)
    yield target


def unique(name="alice"):
    return f"{name}-{uuid.uuid4().hex[:10]}@example.com"


def message(r):
    return r.json()["error"]["message"]


def test_verify_email_code_from_the_inbox_verifies_and_is_used_up(t):
    email = unique()
    user = t.register(email)
    r = t.itk("sendOobCode", {"idToken": user["idToken"], "requestType": "VERIFY_EMAIL"})
    assert r.status_code == 200, r.text
    assert r.json()["email"] == email and "oobCode" not in r.json() and "oobLink" not in r.json()
    (oob,) = t.inbox(email)
    assert oob["requestType"] == "VERIFY_EMAIL"
    r = t.itk("update", {"oobCode": oob["oobCode"]})  # the code alone, no idToken
    assert r.status_code == 200, r.text
    assert (r.json()["localId"], r.json()["email"], r.json()["emailVerified"]) == (user["localId"], email, True)
    assert t.inbox(email) == []


def test_oauth_requests_get_the_code_and_link_back(t):
    email = unique()
    t.register(email)
    for body in ({"email": email, "requestType": "PASSWORD_RESET"}, {"email": email, "requestType": "VERIFY_EMAIL"},
                 {"email": email, "newEmail": unique("bob"), "requestType": "VERIFY_AND_CHANGE_EMAIL"}):
        r = t.itk("sendOobCode", {**body, "returnOobLink": True}, admin=True)
        assert r.status_code == 200, r.text
        assert r.json()["email"] == email and isinstance(r.json()["oobCode"], str) and isinstance(r.json()["oobLink"], str)
        assert r.json()["oobLink"].startswith(t.url + "/emulator/action?mode=")


def test_oauth_requests_by_id_token(t):
    email = unique()
    user = t.register(email)
    for body in ({"idToken": user["idToken"], "requestType": "VERIFY_EMAIL"},
                 {"email": email, "newEmail": unique("bob"), "idToken": user["idToken"], "requestType": "VERIFY_AND_CHANGE_EMAIL"}):
        r = t.itk("sendOobCode", {**body, "returnOobLink": True}, admin=True)
        assert r.status_code == 200, r.text
        assert r.json()["email"] == email and isinstance(r.json()["oobCode"], str) and isinstance(r.json()["oobLink"], str)


def test_verify_email_without_id_token_or_email(t):
    email = unique()
    t.register(email)
    assert message(t.itk("sendOobCode", {"idToken": "hoge", "requestType": "VERIFY_EMAIL"})) == "INVALID_ID_TOKEN"
    assert message(t.itk("sendOobCode", {"returnOobLink": True, "requestType": "VERIFY_EMAIL"}, admin=True)) == "MISSING_EMAIL"
    assert t.inbox(email) == []


def test_a_client_verify_email_needs_the_id_token_and_ignores_the_email(t):
    email = unique()
    t.register(email)
    r = t.itk("sendOobCode", {"email": email, "requestType": "VERIFY_EMAIL"})
    # The official emulator parses the absent token (INVALID_ID_TOKEN); ours says it is missing, as for
    # VERIFY_AND_CHANGE_EMAIL (where the official emulator says MISSING_ID_TOKEN too).
    assert r.status_code == 400 and message(r) == ("INVALID_ID_TOKEN" if t.official else "MISSING_ID_TOKEN")
    assert t.inbox(email) == []


def test_verify_email_for_no_user(t):
    email = unique("nosuchuser")
    r = t.itk("sendOobCode", {"email": email, "returnOobLink": True, "requestType": "VERIFY_EMAIL"}, admin=True)
    assert r.status_code == 400 and message(r) == "USER_NOT_FOUND"
    assert t.inbox(email) == []


def test_verify_email_for_an_account_without_email(t):
    r = t.itk("signUp", {"returnSecureToken": True})
    assert r.status_code == 200, r.text
    r = t.itk("sendOobCode", {"idToken": r.json()["idToken"], "requestType": "VERIFY_EMAIL"})
    assert r.status_code == 400 and message(r) == "MISSING_EMAIL"


def test_a_disabled_user_gets_no_code(t):
    email = unique("foo")
    user = t.register(email, "foobar")
    r = t.post(f"/identitytoolkit.googleapis.com/v1/projects/{P}/accounts:update", {"localId": user["localId"], "disableUser": True},
               key=None, headers=OWNER)
    assert r.status_code == 200, r.text
    r = t.itk("sendOobCode", {"email": email, "idToken": user["idToken"], "requestType": "VERIFY_EMAIL"})
    assert r.status_code == 400 and message(r) == "USER_DISABLED"
    assert t.inbox(email) == []


def test_a_continue_url_without_scheme_or_host(t):
    email = unique()
    user = t.register(email)
    r = t.itk("sendOobCode", {"idToken": user["idToken"], "requestType": "VERIFY_EMAIL", "continueUrl": "noSchemeOrHost"})
    assert r.status_code == 400 and "INVALID_CONTINUE_URI" in message(r)
    assert t.inbox(email) == []


def test_a_disabled_tenant(t):
    tid = t.tenant(displayName="closed", disableAuth=True)
    assert message(t.itk("sendOobCode", {"tenantId": tid})) == "PROJECT_DISABLED"
    assert message(t.itk("resetPassword", {"tenantId": tid})) == "PROJECT_DISABLED"


def test_email_sign_in_off_in_a_tenant(t):
    tid = t.tenant(displayName="nolinks", disableAuth=False, enableEmailLinkSignin=False)
    r = t.itk("sendOobCode", {"tenantId": tid, "email": "bob@example.com", "requestType": "EMAIL_SIGNIN"})
    assert r.status_code == 400 and message(r) == "OPERATION_NOT_ALLOWED"
    assert t.inbox("bob@example.com", tenant=tid) == []


def test_reset_password_code_resets_and_expires_older_id_tokens(t):
    email = unique()
    user = t.register(email)
    t.later(2)  # the ID token was issued in the past
    r = t.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": email})
    assert r.status_code == 200 and r.json()["email"] == email and "oobCode" not in r.json() and "oobLink" not in r.json()
    (oob,) = t.inbox(email)
    assert oob["requestType"] == "PASSWORD_RESET"
    r = t.itk("resetPassword", {"oobCode": oob["oobCode"], "newPassword": "notasecret2"})
    assert r.status_code == 200, r.text
    assert r.json()["requestType"] == "PASSWORD_RESET" and r.json()["email"] == email
    r = t.itk("lookup", {"idToken": user["idToken"]})
    assert r.status_code == 400 and message(r) == "TOKEN_EXPIRED"
    assert t.itk("signInWithPassword", {"email": email, "password": "notasecret2"}).status_code == 200
    assert t.inbox(email) == []


def test_reset_password_tells_each_codes_purpose_without_using_it(t):
    email, new = unique(), unique("bob")
    user = t.register(email)
    for body in ({"requestType": "PASSWORD_RESET", "email": email}, {"requestType": "VERIFY_EMAIL", "idToken": user["idToken"]},
                 {"requestType": "EMAIL_SIGNIN", "email": new},
                 {"requestType": "VERIFY_AND_CHANGE_EMAIL", "email": email, "newEmail": new, "idToken": user["idToken"]}):
        r = t.itk("sendOobCode", body)
        assert r.status_code == 200, r.text
    oobs = t.inbox(email) + t.inbox(new)
    assert sorted(o["requestType"] for o in oobs) == ["EMAIL_SIGNIN", "PASSWORD_RESET", "VERIFY_AND_CHANGE_EMAIL", "VERIFY_EMAIL"]
    for oob in oobs:
        r = t.itk("resetPassword", {"oobCode": oob["oobCode"]})
        assert r.status_code == 200, r.text
        assert r.json()["requestType"] == oob["requestType"]
        if oob["requestType"] == "EMAIL_SIGNIN":
            assert "email" not in r.json(), "the email of a sign-in link is the person's to give"
        else:
            assert r.json()["email"] == oob["email"]
        if oob["requestType"] == "VERIFY_AND_CHANGE_EMAIL":
            assert r.json()["newEmail"] == new
    assert len(t.inbox(email) + t.inbox(new)) == 4


def test_reset_password_with_password_sign_up_off(t):
    tid = t.tenant(displayName="nopw", disableAuth=False, allowPasswordSignup=False)
    assert message(t.itk("resetPassword", {"tenantId": tid})) == "PASSWORD_LOGIN_DISABLED"


def test_a_reset_for_no_user_with_email_privacy_off(t):
    r = t.itk("sendOobCode", {"email": unique(), "requestType": "PASSWORD_RESET", "returnOobLink": True}, admin=True)
    assert r.status_code == 400 and message(r) == "EMAIL_NOT_FOUND"
    r = t.itk("sendOobCode", {"email": unique(), "requestType": "PASSWORD_RESET"})
    assert r.status_code == 400 and message(r) == "EMAIL_NOT_FOUND"


def test_a_reset_for_no_user_with_email_privacy_on(t):
    email = unique()
    t.privacy(True)
    try:
        # A client is told nothing: the answer is a known email's, and nothing is stored.
        r = t.itk("sendOobCode", {"email": email, "requestType": "PASSWORD_RESET"})
        assert r.status_code == 200 and r.json() == {"kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": email}
        r = t.itk("sendOobCode", {"email": email, "requestType": "PASSWORD_RESET", "returnOobLink": True}, admin=True)
        if t.official:
            assert r.status_code == 200 and r.json() == {"kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": email}
        else:
            # Deliberately: an OAuth (admin) request is no enumeration, and a link it cannot be given is an error
            # (firebase-admin's generate_password_reset_link raises EmailNotFoundError).
            assert r.status_code == 400 and message(r) == "EMAIL_NOT_FOUND"
        assert t.inbox(email) == []
    finally:
        t.privacy(False)


def test_verify_and_change_email_code_changes_the_email(t):
    email, new = unique(), unique("bob")
    user = t.register(email)
    r = t.itk("sendOobCode", {"email": email, "newEmail": new, "idToken": user["idToken"], "requestType": "VERIFY_AND_CHANGE_EMAIL"})
    assert r.status_code == 200, r.text
    assert r.json() == {"kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": email}
    (oob,) = t.inbox(email)
    assert oob["requestType"] == "VERIFY_AND_CHANGE_EMAIL" and oob["newEmail"] == new
    r = t.itk("update", {"oobCode": oob["oobCode"]})
    assert r.status_code == 200, r.text
    assert (r.json()["localId"], r.json()["email"], r.json()["emailVerified"]) == (user["localId"], new, True)
    # On purpose: the old address is mailed a RECOVER_EMAIL code, as production does; the official emulator sends none.
    expected = [] if t.official else [("RECOVER_EMAIL", new)]
    assert [(o["requestType"], o.get("newEmail")) for o in t.inbox(email)] == expected
    assert t.itk("signInWithPassword", {"email": new, "password": "notasecret"}).status_code == 200


def test_verify_and_change_email_missing_parts(t):
    email = unique()
    t.register(email)
    new = unique("bob")
    assert message(t.itk("sendOobCode", {"newEmail": new, "requestType": "VERIFY_AND_CHANGE_EMAIL"})) == "MISSING_ID_TOKEN"
    assert message(t.itk("sendOobCode", {"email": email, "requestType": "VERIFY_AND_CHANGE_EMAIL"})) == "MISSING_NEW_EMAIL"
    r = t.itk("sendOobCode", {"newEmail": new, "returnOobLink": True, "requestType": "VERIFY_AND_CHANGE_EMAIL"}, admin=True)
    assert message(r) == "MISSING_EMAIL"
    r = t.itk("sendOobCode", {"email": email, "returnOobLink": True, "requestType": "VERIFY_AND_CHANGE_EMAIL"}, admin=True)
    assert message(r) == "MISSING_NEW_EMAIL"
    assert t.inbox(email) == []


def test_a_client_verify_and_change_email_needs_the_id_token(t):
    email = unique()
    t.register(email)
    r = t.itk("sendOobCode", {"email": email, "newEmail": unique("bob"), "requestType": "VERIFY_AND_CHANGE_EMAIL"})
    assert r.status_code == 400 and message(r) == "MISSING_ID_TOKEN"
    assert t.inbox(email) == []


def test_verify_and_change_email_for_no_user(t):
    email = unique("nosuchuser")
    r = t.itk("sendOobCode", {"email": email, "newEmail": unique("bob"), "returnOobLink": True, "requestType": "VERIFY_AND_CHANGE_EMAIL"},
              admin=True)
    assert r.status_code == 400 and message(r) == "USER_NOT_FOUND"
    assert t.inbox(email) == []


def test_verify_and_change_email_to_another_users_email(t):
    email, other = unique(), unique("bob")
    user = t.register(email)
    t.register(other)
    r = t.itk("sendOobCode", {"idToken": user["idToken"], "email": email, "newEmail": other, "requestType": "VERIFY_AND_CHANGE_EMAIL"})
    assert r.status_code == 400 and message(r) == "EMAIL_EXISTS"
    r = t.itk("sendOobCode", {"email": email, "newEmail": other, "returnOobLink": True, "requestType": "VERIFY_AND_CHANGE_EMAIL"}, admin=True)
    assert r.status_code == 400 and message(r) == "EMAIL_EXISTS"
    assert t.inbox(email) == []
