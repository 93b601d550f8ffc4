"""Session cookies: firebase-admin's create_session_cookie / verify_session_cookie against the running binary, in
emulator mode and as a production-mode verifier pointed at the keys we publish; google-auth and PyJWT on the same keys."""
import datetime
import json
import time
import uuid

import firebase_admin
import jwt
import pytest
import requests
from cryptography import x509
from firebase_admin import _token_gen
from firebase_admin import auth as admin_auth
from google.auth import _helpers as google_helpers
from google.auth.transport.requests import Request
from google.oauth2 import id_token as google_id_token

from conftest import claims_of, dummy_credential, error_message

COOKIE_KEYS = "/www.googleapis.com/identitytoolkit/v3/relyingparty/publicKeys"
CREATE = "/identitytoolkit.googleapis.com/v1/projects/demo-phone:createSessionCookie"
ADMIN = {"Authorization": "Bearer owner"}
ISSUER = "https://session.firebase.google.com/demo-phone"


def emulator_now(emu):
    return emu.session.get(emu.url + "/emulator/v1/clock").json()["nowMillis"] / 1000


def wait_past(second):
    """Waits (bounded) until the wall clock's whole second is past `second`: revoke_refresh_tokens stamps
    validSince from the caller's clock, and a cookie issued in that same second is not revoked (iat == validSince)."""
    for _ in range(60):
        if int(time.time()) > second:
            return
        time.sleep(0.05)
    raise AssertionError("the wall clock did not move past the cookie's iat")


@pytest.fixture
def production_verifier(fresh, monkeypatch):
    """firebase-admin in production mode (no emulator variable) whose session-cookie key URL is ours, and whose
    clock (google-auth's) is the emulator's."""
    emu = fresh()
    monkeypatch.delenv("FIREBASE_AUTH_EMULATOR_HOST", raising=False)
    monkeypatch.setattr(_token_gen, "COOKIE_CERT_URI", emu.url + COOKIE_KEYS)
    monkeypatch.setattr(google_helpers, "utcnow",
                        lambda: datetime.datetime.fromtimestamp(emulator_now(emu), datetime.timezone.utc).replace(tzinfo=None))
    app = firebase_admin.initialize_app(dummy_credential(), options={"projectId": "demo-phone"}, name=f"prod-cookie-{uuid.uuid4()}")
    yield emu, app
    firebase_admin.delete_app(app)


def create_cookie(emu, id_token, seconds=600, path=CREATE):
    r = emu.session.post(emu.url + path, json={"idToken": id_token, "validDuration": str(seconds)}, headers=ADMIN)
    assert r.status_code == 200, r.text
    return r.json()["sessionCookie"]


def test_create_and_verify_with_check_revoked_then_revocation(admin):
    emu, app = admin
    body = emu.sign_in()
    cookie = admin_auth.create_session_cookie(body["idToken"], expires_in=datetime.timedelta(minutes=5), app=app)
    claims = claims_of(cookie)
    assert claims["iss"] == ISSUER and claims["aud"] == "demo-phone" and claims["exp"] - claims["iat"] == 300
    decoded = admin_auth.verify_session_cookie(cookie, check_revoked=True, app=app)
    assert decoded["uid"] == body["localId"] and decoded["phone_number"] == body["phoneNumber"]
    assert decoded["firebase"]["sign_in_provider"] == "phone"

    wait_past(claims["iat"])
    admin_auth.revoke_refresh_tokens(body["localId"], app=app)
    with pytest.raises(admin_auth.RevokedSessionCookieError):
        admin_auth.verify_session_cookie(cookie, check_revoked=True, app=app)
    assert admin_auth.verify_session_cookie(cookie, app=app)["uid"] == body["localId"]  # without the check it still decodes
    # The revoked ID token cannot make a new cookie; a fresh sign-in can.
    with pytest.raises(Exception) as e:
        admin_auth.create_session_cookie(body["idToken"], expires_in=300, app=app)
    assert "TOKEN_EXPIRED" in str(e.value)
    fresh_cookie = admin_auth.create_session_cookie(emu.sign_in()["idToken"], expires_in=300, app=app)
    assert admin_auth.verify_session_cookie(fresh_cookie, check_revoked=True, app=app)["uid"] == body["localId"]


def test_each_cookie_is_a_session_cookie_created_event_without_the_cookie(admin):
    emu, app = admin
    body = emu.sign_in()
    cookie = admin_auth.create_session_cookie(body["idToken"], expires_in=datetime.timedelta(minutes=5), app=app)
    with pytest.raises(ValueError):
        admin_auth.create_session_cookie(body["idToken"], expires_in=60, app=app)  # refused (by the SDK): no event
    r = emu.session.post(emu.url + CREATE, json={"idToken": body["idToken"], "validDuration": 299}, headers=ADMIN)
    assert r.status_code == 400  # refused by the server: no event
    second = create_cookie(emu, body["idToken"], seconds=86400)
    r = emu.session.get(emu.url + "/emulator/v1/projects/demo-phone/events",
                        params={"format": "jsonl", "follow": "false", "since": "0", "type": "sessionCookie.created"})
    assert r.status_code == 200, r.text
    assert cookie not in r.text and second not in r.text
    events = [json.loads(line) for line in r.text.splitlines() if line]
    assert [(e["type"], e["uid"], e["expiresIn"]) for e in events] == [
        ("sessionCookie.created", body["localId"], 300), ("sessionCookie.created", body["localId"], 86400)]
    assert all(set(e) == {"id", "type", "time", "project", "uid", "expiresIn"} for e in events)


def test_disabled_user_and_bad_tokens(admin):
    emu, app = admin
    body = emu.sign_in()
    cookie = admin_auth.create_session_cookie(body["idToken"], expires_in=600, app=app)
    admin_auth.update_user(body["localId"], disabled=True, app=app)
    with pytest.raises(admin_auth.UserDisabledError):
        admin_auth.verify_session_cookie(cookie, check_revoked=True, app=app)
    with pytest.raises(admin_auth.InvalidIdTokenError):
        admin_auth.create_session_cookie("not-a-token", expires_in=600, app=app)
    # Production's duration bounds, enforced by the server too (the SDK checks them before sending).
    for seconds in (299, 14 * 86400 + 1):
        r = emu.session.post(emu.url + CREATE, json={"idToken": body["idToken"], "validDuration": seconds}, headers=ADMIN)
        assert (r.status_code, error_message(r)) == (400, "INVALID_DURATION")
    # Admin only.
    r = emu.session.post(emu.url + CREATE, params={"key": "fake-api-key"}, json={"idToken": body["idToken"]})
    assert r.status_code == 401


def test_google_auth_and_pyjwt_verify_the_signature_with_the_published_certs(emu):
    cookie = create_cookie(emu, emu.sign_in()["idToken"])
    claims = google_id_token.verify_token(cookie, Request(), audience="demo-phone", certs_url=emu.url + COOKIE_KEYS)
    assert claims["iss"] == ISSUER

    certs = requests.get(emu.url + COOKIE_KEYS).json()
    kid = jwt.get_unverified_header(cookie)["kid"]
    public_key = x509.load_pem_x509_certificate(certs[kid].encode()).public_key()
    decoded = jwt.decode(cookie, public_key, algorithms=["RS256"], audience="demo-phone", issuer=ISSUER)
    assert decoded["sub"] == claims["sub"]
    h, p, s = cookie.split(".")
    with pytest.raises(jwt.PyJWTError):
        jwt.decode(h + "." + p + "." + s[:-4] + ("AAAA" if s[-4:] != "AAAA" else "BBBB"), public_key, algorithms=["RS256"], audience="demo-phone")
    # An ID token is not a session cookie (issuer), and the cookie is not an ID token.
    with pytest.raises(jwt.InvalidIssuerError):
        jwt.decode(emu.sign_in()["idToken"], public_key, algorithms=["RS256"], audience="demo-phone", issuer=ISSUER)


def test_production_mode_firebase_admin_verifies_and_expires_on_the_emulator_clock(production_verifier):
    emu, app = production_verifier
    body = emu.sign_in()
    cookie = create_cookie(emu, body["idToken"], seconds=300)
    assert admin_auth.verify_session_cookie(cookie, app=app)["uid"] == body["localId"]
    h, p, s = cookie.split(".")
    with pytest.raises(admin_auth.InvalidSessionCookieError):
        admin_auth.verify_session_cookie(h + "." + p + "." + s[:-4] + ("AAAA" if s[-4:] != "AAAA" else "BBBB"), app=app)
    # An ID token is refused by the cookie verifier (wrong issuer).
    with pytest.raises(admin_auth.InvalidSessionCookieError):
        admin_auth.verify_session_cookie(body["idToken"], app=app)
    # Five minutes later on the emulator clock the cookie has expired.
    assert emu.session.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 301}).status_code == 200
    with pytest.raises(admin_auth.ExpiredSessionCookieError):
        admin_auth.verify_session_cookie(cookie, app=app)
    # A cookie made now (on the advanced clock) is good again.
    later = create_cookie(emu, emu.sign_in()["idToken"], seconds=300)
    assert admin_auth.verify_session_cookie(later, app=app)["uid"] == body["localId"]


def test_tenant_session_cookie(admin):
    emu, app = admin
    tenant = "cookie-team"
    session = emu.send("+16505554567", tenantId=tenant)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "123456", "tenantId": tenant})
    assert r.status_code == 200, r.text
    cookie = create_cookie(emu, r.json()["idToken"], path=f"/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/{tenant}:createSessionCookie")
    assert claims_of(cookie)["firebase"]["tenant"] == tenant
    r2 = emu.session.post(emu.url + CREATE, json={"idToken": r.json()["idToken"]}, headers=ADMIN)
    assert (r2.status_code, error_message(r2)) == (400, "TENANT_ID_MISMATCH")


def test_signing_none_gives_unsigned_cookies_firebase_admin_accepts(fresh, monkeypatch):
    emu = fresh("--token-signing", "none")
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    app = firebase_admin.initialize_app(options={"projectId": "demo-phone"}, name=f"none-{uuid.uuid4()}")
    try:
        body = emu.sign_in()
        cookie = admin_auth.create_session_cookie(body["idToken"], expires_in=600, app=app)
        assert cookie.endswith(".") and jwt.get_unverified_header(cookie)["alg"] == "none"
        assert admin_auth.verify_session_cookie(cookie, check_revoked=True, app=app)["uid"] == body["localId"]
    finally:
        firebase_admin.delete_app(app)
