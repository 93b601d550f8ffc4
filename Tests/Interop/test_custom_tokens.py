"""Custom tokens from real minters (firebase-admin in emulator and production mode, a hand-built RS256 token) exchanged
at accounts:signInWithCustomToken by REST and by the real JS SDK."""
import json
import os
import shutil
import subprocess
import time
import uuid

import firebase_admin
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from firebase_admin import auth as admin_auth
from firebase_admin import tenant_mgt

from conftest import FICTIONAL, FICTIONAL_CODE, claims_of, dummy_credential, error_message

AUDIENCE = "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit"
ADMIN = {"Authorization": "Bearer owner"}
JS_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "custom_token.cjs")


def exchange(emu, token, **extra):
    return emu.itk("signInWithCustomToken", {"token": token if isinstance(token, str) else token.decode(), "returnSecureToken": True, **extra})


def service_account_token(uid="rsa-user", claims=None, aud=AUDIENCE, iat=None, lifetime=3600, key=None, project="demo-phone", **more):
    """A token built by hand as the docs describe (PyJWT, RS256, a key generated here)."""
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time()) if iat is None else iat
    email = f"minter@{project}.iam.gserviceaccount.com"
    payload = {"iss": email, "sub": email, "aud": aud, "iat": now, "exp": now + lifetime, "uid": uid, **more}
    if claims is not None:
        payload["claims"] = claims
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return jwt.encode(payload, pem, algorithm="RS256", headers={"kid": "test-key"})


def test_firebase_admin_emulator_mode_token_signs_in_with_its_claims(admin):
    emu, app = admin
    token = admin_auth.create_custom_token("uid-alice", {"role": "admin", "premium": True}, app=app)
    r = exchange(emu, token)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["isNewUser"] is True and body["expiresIn"] == "3600" and "kind" not in body
    claims = claims_of(body["idToken"])
    assert claims["sub"] == "uid-alice" and claims["role"] == "admin" and claims["premium"] is True
    assert claims["firebase"]["sign_in_provider"] == "custom"
    decoded = admin_auth.verify_id_token(body["idToken"], app=app, check_revoked=True)
    assert decoded["uid"] == "uid-alice" and decoded["role"] == "admin"
    user = admin_auth.get_user("uid-alice", app=app)
    assert user.custom_claims is None  # the token's claims belong to the session, not the user
    assert user.user_metadata.creation_timestamp and user.user_metadata.last_sign_in_timestamp
    # The claims stay on refresh.
    r = emu.post("/securetoken.googleapis.com/v1/token", None, data={"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.status_code == 200, r.text
    assert claims_of(r.json()["id_token"])["role"] == "admin"
    # A second sign-in is not a new user.
    assert exchange(emu, admin_auth.create_custom_token("uid-alice", app=app)).json()["isNewUser"] is False
    assert "custom token sign-in: new user" in "".join(emu._log)


def test_firebase_admin_production_mode_rs256_token(fresh, monkeypatch):
    """firebase-admin without the emulator variable signs an RS256 token with a service account's key."""
    emu = fresh()
    monkeypatch.delenv("FIREBASE_AUTH_EMULATOR_HOST", raising=False)
    app = firebase_admin.initialize_app(dummy_credential(), options={"projectId": "demo-phone"}, name=f"prod-{uuid.uuid4()}")
    try:
        token = admin_auth.create_custom_token("uid-prod", {"team": "red"}, app=app)
        assert jwt.get_unverified_header(token)["alg"] == "RS256"
        r = exchange(emu, token)
        assert r.status_code == 200, r.text
        claims = claims_of(r.json()["idToken"])
        assert claims["sub"] == "uid-prod" and claims["team"] == "red"
    finally:
        firebase_admin.delete_app(app)


def test_hand_built_rs256_token_and_production_errors(emu):
    r = exchange(emu, service_account_token(claims={"tier": "gold"}))
    assert r.status_code == 200, r.text
    assert claims_of(r.json()["idToken"])["tier"] == "gold"

    cases = [
        (service_account_token(aud="demo-phone"), "INVALID_CUSTOM_TOKEN : ((Invalid aud (audience): demo-phone"),
        (service_account_token(iat=int(time.time()) - 7200), "INVALID_CUSTOM_TOKEN : Token expired"),
        (service_account_token(lifetime=7200), "INVALID_CUSTOM_TOKEN : The token lifetime"),
        (service_account_token(claims={"blob": "x" * 1000}), "CLAIMS_TOO_LARGE"),
        (service_account_token(claims={"sub": "someone-else"}), "FORBIDDEN_CLAIM : sub"),
        (service_account_token(claims={"firebase": {}}), "FORBIDDEN_CLAIM : firebase"),
        (service_account_token(uid="u" * 129), "INVALID_CUSTOM_TOKEN : uid must be"),
        (service_account_token(project="another-project"), "CREDENTIAL_MISMATCH"),
        (service_account_token(tenant_id="team-a"), "TENANT_ID_MISMATCH"),
    ]
    for token, expected in cases:
        r = exchange(emu, token)
        assert r.status_code == 400, (expected, r.text)
        assert error_message(r).startswith(expected), (expected, r.text)
    # An ID token is not a custom token.
    id_token = emu.sign_in()["idToken"]
    assert error_message(exchange(emu, id_token)).startswith("INVALID_CUSTOM_TOKEN : ((Invalid aud (audience)")
    # Malformed input: a clean error, never a crash.
    for junk in ["", "x", "a.b.c", "e30.e30.", "{\"uid\":\"x\"}", "." * 5000, "eyJ" * 20_000]:
        r = exchange(emu, junk)
        assert r.status_code == 400, (junk[:20], r.text)
        assert error_message(r) in ("MISSING_CUSTOM_TOKEN",) or error_message(r).startswith("INVALID_CUSTOM_TOKEN"), r.text
    assert emu.session.get(emu.url + "/").status_code == 200


def test_a_foreign_web_page_cannot_exchange_a_custom_token(emu):
    """Custom tokens are not verified here, so a page from another origin could sign in as anyone: refused (403, no
    CORS headers) before anything runs; localhost pages and SDKs (no Origin) are unaffected."""
    token = service_account_token(uid="victim")
    r = emu.post("/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken", {"token": token},
                 headers={"Origin": "https://evil.example", "Content-Type": "text/plain"})
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"
    assert "Access-Control-Allow-Origin" not in r.headers
    lookup = emu.post("/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", {"localId": ["victim"]}, key=None, headers=ADMIN)
    assert "users" not in lookup.json()
    r = emu.post("/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken", {"token": token}, headers={"Origin": "http://localhost:5173"})
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"


def test_legacy_verify_custom_token_carries_kind(emu):
    r = emu.post("/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyCustomToken",
                 {"token": service_account_token(uid="ios-user"), "returnSecureToken": True})
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "identitytoolkit#VerifyCustomTokenResponse"
    assert claims_of(r.json()["idToken"])["sub"] == "ios-user"


def test_custom_token_user_links_a_phone_number(admin):
    emu, app = admin
    body = exchange(emu, admin_auth.create_custom_token("linker", {"role": "x"}, app=app)).json()
    session = emu.send(FICTIONAL)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": FICTIONAL_CODE, "idToken": body["idToken"]})
    assert r.status_code == 200, r.text
    assert r.json()["localId"] == "linker" and r.json()["isNewUser"] is False
    user = admin_auth.get_user("linker", app=app)
    assert user.phone_number == FICTIONAL and [p.provider_id for p in user.provider_data] == ["phone"]
    # The phone now signs in to the same user, and the custom token's next session sees the phone identity.
    assert emu.sign_in()["localId"] == "linker"
    claims = claims_of(exchange(emu, admin_auth.create_custom_token("linker", app=app)).json()["idToken"])
    assert claims["phone_number"] == FICTIONAL and claims["firebase"]["identities"] == {"phone": [FICTIONAL]}


@pytest.fixture
def tenant_admin(fresh, monkeypatch):
    """A fresh emulator, a tenant made over the v2 REST API (Python's tenant_mgt CRUD always calls production) and
    a firebase-admin app in emulator mode (tenant-scoped clients insist on a credential: a dummy one)."""
    emu = fresh()
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    r = emu.session.post(emu.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", json={"displayName": "blue-team"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    app = firebase_admin.initialize_app(dummy_credential(), options={"projectId": "demo-phone"}, name=f"tenant-{uuid.uuid4()}")
    yield emu, app, tenant_mgt.Tenant(r.json()).tenant_id
    firebase_admin.delete_app(app)


def test_tenant_custom_token(tenant_admin):
    emu, app, tenant = tenant_admin
    tenant_auth = tenant_mgt.auth_for_tenant(tenant, app=app)
    token = tenant_auth.create_custom_token("tenant-user", {"scope": "blue"})
    assert claims_of(token.decode())["tenant_id"] == tenant
    assert error_message(exchange(emu, token)) == "TENANT_ID_MISMATCH"
    r = exchange(emu, token, tenantId=tenant)
    assert r.status_code == 200, r.text
    claims = claims_of(r.json()["idToken"])
    assert claims["firebase"]["tenant"] == tenant and claims["scope"] == "blue"
    assert tenant_auth.get_user("tenant-user").tenant_id == tenant
    with pytest.raises(admin_auth.UserNotFoundError):
        admin_auth.get_user("tenant-user", app=app)


def test_claims_survive_a_restart_with_a_data_dir(fresh, tmp_path):
    data = str(tmp_path / "data")
    emu = fresh("--data-dir", data)
    body = exchange(emu, service_account_token(uid="durable", claims={"role": "keeper"})).json()
    assert emu.stop() == 0
    emu = fresh("--data-dir", data)
    r = emu.post("/securetoken.googleapis.com/v1/token", None, data={"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.status_code == 200, r.text
    claims = claims_of(r.json()["id_token"])
    assert claims["sub"] == "durable" and claims["role"] == "keeper" and claims["firebase"]["sign_in_provider"] == "custom"


def test_signing_none_accepts_the_official_emulators_fake_tokens(fresh):
    emu = fresh("--token-signing", "none")
    r = exchange(emu, json.dumps({"uid": "fake-json", "claims": {"a": 1}}))
    assert r.status_code == 200, r.text
    assert claims_of(r.json()["idToken"])["a"] == 1
    assert r.json()["idToken"].endswith(".")  # unsigned, as the official emulator
    # The default mode refuses them (they are no JWT).
    other = fresh()
    assert error_message(exchange(other, json.dumps({"uid": "fake-json"}))).startswith("INVALID_CUSTOM_TOKEN")


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_sign_in_with_custom_token_then_link_phone(admin):
    """The real JS SDK: signInWithCustomToken lands on the uid with the claims (kept on refresh), then
    linkWithPhoneNumber adds the phone to that same user."""
    emu, app = admin
    token = admin_auth.create_custom_token("js-user", {"role": "editor", "level": 2}, app=app).decode()
    r = subprocess.run(["node", JS_DRIVER, token], env={**os.environ, "EMULATOR_URL": emu.url}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["garbage"] == "auth/invalid-custom-token"
    assert out["uid"] == "js-user" and out["isNewUser"] is True and out["signInProvider"] == "custom"
    assert out["claims"]["role"] == "editor" and out["claims"]["level"] == 2
    assert out["refreshedClaims"]["role"] == "editor" and out["refreshedDiffers"] is True
    assert out["linkedUid"] == "js-user" and out["linkedPhone"] == FICTIONAL and out["linkedProviders"] == ["phone"]
    assert admin_auth.get_user("js-user", app=app).phone_number == FICTIONAL


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_tenant_custom_token(tenant_admin):
    emu, app, tenant = tenant_admin
    token = tenant_mgt.auth_for_tenant(tenant, app=app).create_custom_token("js-tenant-user").decode()
    r = subprocess.run(["node", JS_DRIVER, token, FICTIONAL, FICTIONAL_CODE, tenant], env={**os.environ, "EMULATOR_URL": emu.url},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["uid"] == "js-tenant-user" and out["tenantId"] == tenant
    assert out["claims"]["firebase"]["tenant"] == tenant
