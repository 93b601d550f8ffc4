"""App Check and Phone Number Verification tokens from the running binary, verified by firebase-admin (7.7), PyJWT and
google-auth with their key URLs pointed at the emulator; App Check enforcement on a real phone sign-in."""
import base64
import datetime
import hashlib
import hmac
import json
import uuid

import firebase_admin
import jwt
import pytest
from firebase_admin import app_check, phone_number_verification as pnv
from google.auth.transport.requests import Request
from google.oauth2 import id_token

from conftest import FICTIONAL, FICTIONAL_CODE, claims_of, dummy_credential

EMU = "/emulator/v1/projects/demo-phone"
APP_CHECK_JWKS = "/firebaseappcheck.googleapis.com/v1/jwks"
PNV_JWKS = "/fpnv.googleapis.com/v1beta/jwks"
WEB_APP = "1:12345:web:0123456789abcdef"


@pytest.fixture(scope="module")
def emu():
    from conftest import Emulator
    e = Emulator()
    yield e
    assert e.stop() == 0


def mint(emu, **body):
    r = emu.session.post(emu.url + EMU + "/appCredentials", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def with_header(token, header, key=b"secret"):
    """The token's payload under another header, signed with HMAC-SHA256 (a forgery a verifier must refuse)."""
    _, p, _ = token.split(".")
    h = b64(json.dumps(header).encode())
    return f"{h}.{p}." + b64(hmac.new(key, f"{h}.{p}".encode(), hashlib.sha256).digest())


def tampered(token):
    h, p, s = token.split(".")
    claims = claims_of(token)
    claims["sub"] = claims["sub"][:-1] + ("0" if claims["sub"][-1] != "0" else "1")
    return h + "." + b64(json.dumps(claims).encode()) + "." + s


def later(monkeypatch, hours):
    """PyJWT's clock (what firebase-admin's checks use), `hours` ahead of the real time."""
    real = datetime.datetime

    class Later(real):
        @classmethod
        def now(cls, tz=None):
            return real.now(tz) + datetime.timedelta(hours=hours)

    monkeypatch.setattr(jwt.api_jwt, "datetime", Later)


@pytest.fixture
def admin_app(emu, monkeypatch):
    """firebase-admin in production mode whose App Check and PNV key URLs are the emulator's."""
    monkeypatch.setattr(app_check._AppCheckService, "_JWKS_URL", emu.url + APP_CHECK_JWKS)
    monkeypatch.setattr(pnv, "_FPNV_JWKS_URL", emu.url + PNV_JWKS)
    apps = []

    def make(project_id):
        a = firebase_admin.initialize_app(dummy_credential(), options={"projectId": project_id}, name=f"attest-{uuid.uuid4()}")
        apps.append(a)
        return a

    yield make
    for a in apps:
        firebase_admin.delete_app(a)


# -- App Check ---------------------------------------------------------------------------------------------------


def test_firebase_admin_app_check_accepts_minted_and_exchanged_tokens(emu, admin_app):
    app = admin_app("demo-phone")
    token = mint(emu, type="APP_CHECK", appId=WEB_APP)["token"]
    claims = app_check.verify_token(token, app=app)
    assert claims["app_id"] == WEB_APP and claims["sub"] == WEB_APP
    assert claims["iss"] == "https://firebaseappcheck.googleapis.com/12345"
    assert claims["aud"] == ["projects/12345", "projects/demo-phone"]
    assert claims["exp"] - claims["iat"] == 3600
    # What the SDKs' debug provider does: exchange a debug token at production's path.
    r = emu.session.post(emu.url + f"/firebaseappcheck.googleapis.com/v1/projects/demo-phone/apps/{WEB_APP}:exchangeDebugToken",
                         params={"key": "fake-api-key"}, json={"debug_token": str(uuid.uuid4())})
    assert r.status_code == 200, r.text
    assert r.json()["ttl"] == "3600s"
    assert app_check.verify_token(r.json()["token"], app=app)["provider"] == "debug"


def test_firebase_admin_app_check_refuses_tampered_expired_wrong_project_and_wrong_algorithm(emu, admin_app, monkeypatch):
    app = admin_app("demo-phone")
    token = mint(emu, type="APP_CHECK", appId=WEB_APP)["token"]
    kid = jwt.get_unverified_header(token)["kid"]
    with pytest.raises(ValueError, match="signature"):
        app_check.verify_token(tampered(token), app=app)
    with pytest.raises(ValueError, match="incorrect alg"):
        app_check.verify_token(with_header(token, {"alg": "HS256", "kid": kid, "typ": "JWT"}), app=app)
    with pytest.raises(ValueError, match="audience"):
        app_check.verify_token(token, app=admin_app("another-project"))
    # An ID token is not an App Check token: its kid is not in the App Check key set.
    with pytest.raises(Exception):
        app_check.verify_token(emu.sign_in()["idToken"], app=app)
    later(monkeypatch, 2)
    with pytest.raises(ValueError, match="expired"):
        app_check.verify_token(token, app=app)


def test_pyjwt_and_google_auth_verify_app_check_tokens_on_the_same_jwks(emu):
    token = mint(emu, type="APP_CHECK", appId=WEB_APP, ttlSeconds=1800)["token"]
    key = jwt.PyJWKClient(emu.url + APP_CHECK_JWKS).get_signing_key_from_jwt(token)
    claims = jwt.decode(token, key.key, algorithms=["RS256"], audience="projects/demo-phone",
                        issuer="https://firebaseappcheck.googleapis.com/12345")
    assert claims["exp"] - claims["iat"] == 1800
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, key.key, algorithms=["RS256"], audience="projects/another-project")
    # google-auth reads a JWKS at its certs URL too.
    claims = id_token.verify_token(token, Request(), audience="projects/demo-phone", certs_url=emu.url + APP_CHECK_JWKS)
    assert claims["sub"] == WEB_APP
    with pytest.raises(Exception):
        id_token.verify_token(tampered(token), Request(), audience="projects/demo-phone", certs_url=emu.url + APP_CHECK_JWKS)
    with pytest.raises(Exception):
        id_token.verify_token(token, Request(), audience="projects/another-project", certs_url=emu.url + APP_CHECK_JWKS)
    # The ID-token keys are another set.
    ids = {k["kid"] for k in emu.session.get(emu.url + "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com").json()["keys"]}
    assert jwt.get_unverified_header(token)["kid"] not in ids


# -- Phone Number Verification -----------------------------------------------------------------------------------


def test_firebase_admin_pnv_accepts_tokens_for_test_numbers(emu, admin_app):
    # firebase-admin compares `iss` with https://fpnv.googleapis.com/projects/<its project id>, and production's
    # issuer names the project number: the app is initialized with the project number (12345 here).
    app = admin_app("12345")
    body = mint(emu, type="PNV", phoneNumber=FICTIONAL)
    verified = pnv.verify_token(body["token"], app=app)
    assert verified.phone_number == FICTIONAL
    assert verified.issuer == "https://fpnv.googleapis.com/projects/12345"
    assert verified.audience == ["https://fpnv.googleapis.com/projects/12345", "https://fpnv.googleapis.com/projects/demo-phone"]
    header = jwt.get_unverified_header(body["token"])
    assert header["alg"] == "ES256" and header["typ"] == "JWT" and header["kid"]
    assert emu.session.post(emu.url + EMU + "/appCredentials", json={"type": "PNV", "phoneNumber": "+15551234567"}).status_code == 400


def test_firebase_admin_pnv_refuses_tampered_expired_wrong_project_and_wrong_algorithm(emu, admin_app, monkeypatch):
    app = admin_app("12345")
    token = mint(emu, type="PNV", phoneNumber=FICTIONAL)["token"]
    kid = jwt.get_unverified_header(token)["kid"]
    with pytest.raises(pnv.InvalidTokenError):
        pnv.verify_token(tampered(token), app=app)
    with pytest.raises(pnv.InvalidTokenError):
        pnv.verify_token(with_header(token, {"alg": "HS256", "kid": kid, "typ": "JWT"}), app=app)
    with pytest.raises(pnv.InvalidTokenError):
        pnv.verify_token(with_header(token, {"alg": "RS256", "kid": kid, "typ": "JWT"}), app=app)
    with pytest.raises(pnv.InvalidTokenError):
        pnv.verify_token(token, app=admin_app("99999"))
    later(monkeypatch, 2)
    with pytest.raises(pnv.ExpiredTokenError):
        pnv.verify_token(token, app=app)


def test_pyjwt_and_google_auth_verify_pnv_tokens_on_the_same_jwks(emu):
    token = mint(emu, type="PNV", phoneNumber=FICTIONAL, ttlSeconds=600)["token"]
    keys = emu.session.get(emu.url + PNV_JWKS).json()["keys"]
    assert all(k["kty"] == "EC" and k["crv"] == "P-256" and k["alg"] == "ES256" for k in keys)
    key = jwt.PyJWKClient(emu.url + PNV_JWKS).get_signing_key_from_jwt(token)
    # As PNV's docs verify: issuer the project number's, audience naming number or id.
    claims = jwt.decode(token, key.key, algorithms=["ES256"], issuer="https://fpnv.googleapis.com/projects/12345",
                        audience="https://fpnv.googleapis.com/projects/demo-phone")
    assert claims["sub"] == FICTIONAL and claims["exp"] - claims["iat"] == 600
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tampered(token), key.key, algorithms=["ES256"], audience="https://fpnv.googleapis.com/projects/demo-phone")
    claims = id_token.verify_token(token, Request(), audience="https://fpnv.googleapis.com/projects/12345", certs_url=emu.url + PNV_JWKS)
    assert claims["sub"] == FICTIONAL
    with pytest.raises(Exception):
        id_token.verify_token(tampered(token), Request(), audience="https://fpnv.googleapis.com/projects/12345", certs_url=emu.url + PNV_JWKS)


def test_pnv_flow_backend_custom_token_then_sign_in(emu, admin_app):
    """PNV's documented flow: the backend verifies the PNV token, mints a custom token for the number, and the app
    signs in with it (firebase-admin's create_custom_token, then our signInWithCustomToken)."""
    app = admin_app("12345")
    number = pnv.verify_token(mint(emu, type="PNV", phoneNumber=FICTIONAL)["token"], app=app).phone_number
    from firebase_admin import auth as admin_auth
    custom = admin_auth.create_custom_token("pnv-" + number.lstrip("+"), {"phone_verified_by": "pnv"}, app=app).decode()
    r = emu.itk("signInWithCustomToken", {"token": custom, "returnSecureToken": True})
    assert r.status_code == 200, r.text
    claims = claims_of(r.json()["idToken"])
    assert claims["sub"] == "pnv-" + number.lstrip("+") and claims["phone_verified_by"] == "pnv"


# -- enforcement on a real sign-in -------------------------------------------------------------------------------


def phone_sign_in(e, headers):
    r = e.itk("sendVerificationCode", {"phoneNumber": FICTIONAL}, headers=headers)
    if r.status_code != 200:
        return r
    return e.itk("signInWithPhoneNumber", {"sessionInfo": r.json()["sessionInfo"], "code": FICTIONAL_CODE}, headers=headers)


@pytest.mark.parametrize("enforcement", ["OFF", "UNENFORCED", "ENFORCED"])
def test_enforcement_on_phone_sign_in(fresh, enforcement):
    e = fresh()
    assert e.session.patch(e.url + EMU + "/config", json={"appCheck": {"enforcement": enforcement}}).status_code == 200
    token = e.session.post(e.url + EMU + "/appCredentials", json={"type": "APP_CHECK"}).json()["token"]
    assert phone_sign_in(e, {"X-Firebase-AppCheck": token}).status_code == 200
    without = phone_sign_in(e, {})
    invalid = phone_sign_in(e, {"X-Firebase-AppCheck": tampered(token)})
    metrics = e.session.get(e.url + EMU + "/appCheck").json()["metrics"]
    if enforcement == "ENFORCED":
        for r in (without, invalid):
            assert r.status_code == 401
            assert r.json()["error"]["status"] == "UNAUTHENTICATED"
            assert r.json()["error"]["message"] == "Firebase App Check token is invalid"
        assert metrics == {"verified": 2, "missing": 1, "invalid": 1, "refused": 2}
    else:
        assert without.status_code == 200 and invalid.status_code == 200
        expected = {"verified": 2, "missing": 2, "invalid": 2, "refused": 0} if enforcement == "UNENFORCED" else \
            {"verified": 0, "missing": 0, "invalid": 0, "refused": 0}
        assert metrics == expected
    events = e.session.get(e.url + EMU + "/events", params={"format": "jsonl", "follow": "false", "since": "0", "type": "appCheck.checked"}).text
    assert (len(events.strip().splitlines()) if events.strip() else 0) == sum(metrics[k] for k in ("verified", "missing", "invalid"))


def test_keys_persist_with_data_dir(fresh, tmp_path):
    e = fresh("--data-dir", str(tmp_path / "d"))
    kids = [e.session.get(e.url + p).json()["keys"][0]["kid"] for p in (APP_CHECK_JWKS, PNV_JWKS)]
    token = e.session.post(e.url + EMU + "/appCredentials", json={"type": "APP_CHECK"}).json()["token"]
    assert e.stop() == 0
    e2 = fresh("--data-dir", str(tmp_path / "d"))
    assert [e2.session.get(e2.url + p).json()["keys"][0]["kid"] for p in (APP_CHECK_JWKS, PNV_JWKS)] == kids
    key = jwt.PyJWKClient(e2.url + APP_CHECK_JWKS).get_signing_key_from_jwt(token)
    assert jwt.decode(token, key.key, algorithms=["RS256"], audience="projects/demo-phone")["sub"].startswith("1:12345:web:")


def test_the_cli_mints_every_attestation(emu, admin_app):
    from test_cli import run as cli
    r = cli(emu, "credentials", "mint", "app-check", "--app-id", WEB_APP, "--ttl", "1800", "--json")
    assert r.returncode == 0, r.stderr
    claims = app_check.verify_token(json.loads(r.stdout)["token"], app=admin_app("demo-phone"))
    assert claims["app_id"] == WEB_APP and claims["exp"] - claims["iat"] == 1800
    r = cli(emu, "credentials", "mint", "pnv", "--phone", FICTIONAL, "--json")
    assert r.returncode == 0, r.stderr
    assert pnv.verify_token(json.loads(r.stdout)["token"], app=admin_app("12345")).phone_number == FICTIONAL
    for kind, prefix in (("recaptcha", "emu-recaptcha-"), ("play-integrity", "emu-play-integrity-")):
        r = cli(emu, "credentials", "mint", kind, "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["token"].startswith(prefix), r.stderr
    r = cli(emu, "credentials", "mint", "pnv", "--phone", "+15551234567")
    assert r.returncode == 1 and "INVALID_ARGUMENT" in r.stderr + r.stdout, r.stderr
    r = cli(emu, "app-check", "status")
    assert r.returncode == 0 and "enforcement" in r.stdout and "OFF" in r.stdout, r.stdout
