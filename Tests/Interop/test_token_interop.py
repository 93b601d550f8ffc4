"""ID tokens from the running binary, verified by real client libraries from PyPI."""
import os

import firebase_admin
import jwt
import pytest
from firebase_admin import auth as admin_auth
from google.auth.transport.requests import Request
from google.oauth2 import id_token

from conftest import FICTIONAL

X509 = "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
JWKS = "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"


def test_google_auth_verifies_with_our_x509_certs(emu):
    token = emu.sign_in()["idToken"]
    claims = id_token.verify_token(token, Request(), audience="demo-phone", certs_url=emu.url + X509)
    assert claims["phone_number"] == FICTIONAL
    assert claims["iss"] == "https://securetoken.google.com/demo-phone"


def test_google_auth_rejects_wrong_audience(emu):
    token = emu.sign_in()["idToken"]
    with pytest.raises(ValueError):
        id_token.verify_token(token, Request(), audience="another-project", certs_url=emu.url + X509)


def test_pyjwt_verifies_with_our_jwks(emu):
    token = emu.sign_in()["idToken"]
    client = jwt.PyJWKClient(emu.url + JWKS)
    key = client.get_signing_key_from_jwt(token)
    claims = jwt.decode(token, key.key, algorithms=["RS256"], audience="demo-phone", issuer="https://securetoken.google.com/demo-phone")
    assert claims["firebase"]["sign_in_provider"] == "phone"


def test_pyjwt_detects_tampering(emu):
    token = emu.sign_in()["idToken"]
    client = jwt.PyJWKClient(emu.url + JWKS)
    key = client.get_signing_key_from_jwt(token)
    h, p, s = token.split(".")
    tampered = h + "." + p[:-2] + ("A" if p[-2] != "A" else "B") + p[-1] + "." + s
    with pytest.raises(jwt.PyJWTError):
        jwt.decode(tampered, key.key, algorithms=["RS256"], audience="demo-phone")


def test_openid_configuration_points_at_our_jwks(emu):
    doc = emu.session.get(emu.url + "/securetoken.google.com/demo-phone/.well-known/openid-configuration").json()
    assert doc["issuer"] == "https://securetoken.google.com/demo-phone"
    assert "RS256" in doc["id_token_signing_alg_values_supported"]
    keys = emu.session.get(doc["jwks_uri"]).json()["keys"]
    assert keys and all(k["kty"] == "RSA" and k["alg"] == "RS256" and k["e"] == "AQAB" for k in keys)
    r = emu.session.get(emu.url + X509)
    assert r.headers["Cache-Control"].startswith("public, max-age=")


@pytest.fixture
def admin_app(emu, monkeypatch):
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    app = firebase_admin.initialize_app(options={"projectId": "demo-phone"}, name=f"emu-{os.getpid()}-{id(emu)}")
    yield app
    firebase_admin.delete_app(app)


def test_firebase_admin_emulator_mode_verifies(emu, admin_app):
    body = emu.sign_in()
    decoded = admin_auth.verify_id_token(body["idToken"], app=admin_app)
    assert decoded["uid"] == body["localId"]
    assert decoded["phone_number"] == FICTIONAL
    decoded = admin_auth.verify_id_token(body["idToken"], app=admin_app, check_revoked=True)
    assert decoded["uid"] == body["localId"]
    user = admin_auth.get_user(body["localId"], app=admin_app)
    assert user.phone_number == FICTIONAL
    assert [p.provider_id for p in user.provider_data] == ["phone"]
    assert admin_auth.get_user_by_phone_number(FICTIONAL, app=admin_app).uid == body["localId"]
    with pytest.raises(admin_auth.UserNotFoundError):
        admin_auth.get_user("no-such-user", app=admin_app)


def test_firebase_admin_production_mode_with_our_certs(emu, monkeypatch):
    """firebase-admin in production mode (no emulator env): full signature check against our x509 URL."""
    from firebase_admin import _token_gen
    monkeypatch.delenv("FIREBASE_AUTH_EMULATOR_HOST", raising=False)
    monkeypatch.setattr(_token_gen, "ID_TOKEN_CERT_URI", emu.url + X509)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from firebase_admin import credentials
    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    cred = credentials.Certificate({"type": "service_account", "project_id": "demo-phone", "private_key_id": "test", "private_key": pem,
                                    "client_email": "test@demo-phone.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"})
    app = firebase_admin.initialize_app(cred, options={"projectId": "demo-phone"}, name=f"prod-{os.getpid()}")
    try:
        body = emu.sign_in()
        decoded = admin_auth.verify_id_token(body["idToken"], app=app)
        assert decoded["uid"] == body["localId"]
        h, p, s = body["idToken"].split(".")
        with pytest.raises(admin_auth.InvalidIdTokenError):
            admin_auth.verify_id_token(h + "." + p + "." + s[:-4] + "AAAA", app=app)
    finally:
        firebase_admin.delete_app(app)
