"""firebase-tools customToken.spec.ts (sign-in with custom token), as raw HTTP against the release binary started with
`--token-signing none` (the official emulator's unsigned tokens, where fake JSON custom tokens are accepted)."""
import base64
import json
import time

import pytest

from spec_support import PROJECT_ID, Spec, decode, email, err, header_of, start_spec_server

AUDIENCE = "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit"
CLAIMS = {"abc": "def", "ultimate": {"answer": 42}}


@pytest.fixture(scope="module")
def spec():
    e = start_spec_server("--token-signing", "none")
    yield Spec(e)
    assert e.stop() == 0


def b64(o):
    return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()


def unsigned(payload, aud=AUDIENCE):
    now = int(time.time())
    body = {"iat": now, "exp": now + 3600, "aud": aud, "iss": "fake-service-account@example.com",
            "sub": "fake-service-account@example.com", **payload}
    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(body)}."


def exchange(spec, token=None, **body):
    if token is not None:
        body["token"] = token
    return spec.itk("signInWithCustomToken", body)


def test_creates_new_account_from_unsigned_custom_token(spec):
    r = exchange(spec, unsigned({"uid": "someuid", "claims": CLAIMS}))
    assert r.status_code == 200, r.text
    assert r.json()["isNewUser"] is True and isinstance(r.json()["refreshToken"], str)
    tok = r.json()["idToken"]
    assert header_of(tok)["alg"] == "none"
    c = decode(tok)
    assert "provider_id" not in c and c["firebase"]["sign_in_provider"] == "custom"
    assert all(c[k] == v for k, v in CLAIMS.items())
    assert spec.account_by_id_token(tok)["localId"] == "someuid"


def test_signs_into_existing_account_and_merges_claims(spec):
    addr = email()
    local_id = spec.register_user(email=addr, password="notasecret")["localId"]
    account_claims = {"abc": "abc", "foo": "bar"}
    spec.update_account_by_local_id(local_id, customAttributes=json.dumps(account_claims))
    r = exchange(spec, json.dumps({"uid": local_id, "claims": CLAIMS}))
    assert r.status_code == 200 and r.json()["isNewUser"] is False, r.text
    c = decode(r.json()["idToken"])
    assert "provider_id" not in c and c["firebase"]["sign_in_provider"] == "custom"
    assert c["firebase"]["identities"] == {"email": [addr]}
    merged = {**account_claims, **CLAIMS}  # the token's claims win over the account's
    assert all(c[k] == v for k, v in merged.items()), c
    refreshed = spec.s.post(f"{spec.url}/securetoken.googleapis.com/v1/token", params={"key": "fake-api-key"},
                            data={"refreshToken": r.json()["refreshToken"], "grantType": "refresh_token"})
    assert refreshed.status_code == 200, refreshed.text
    c = decode(refreshed.json()["id_token"])
    assert all(c[k] == v for k, v in merged.items()), c


def test_missing_token(spec):
    assert err(exchange(spec)) == (400, "MISSING_CUSTOM_TOKEN")


@pytest.mark.parametrize("token", ["{not+Json,That's=>For@Sure}", "ThisMayLookLikeAJWT.ButItWontDecode.ToJsonObjects"])
def test_invalid_token(spec, token):
    status, message = err(exchange(spec, token))
    assert status == 400 and "INVALID_CUSTOM_TOKEN" in message


def test_wrong_audience(spec):
    status, message = err(exchange(spec, unsigned({"uid": "foo"}, aud="http://localhost/not-the-firebase-auth-audience")))
    assert status == 400 and "INVALID_CUSTOM_TOKEN" in message


@pytest.mark.parametrize("token", [unsigned({}), '{"look": "I do not have uid"}'])
def test_no_uid(spec, token):
    status, message = err(exchange(spec, token))
    assert status == 400 and "MISSING_IDENTIFIER" in message


def test_no_uid_in_rs256_mode():
    # Production answers MISSING_IDENTIFIER too (the SDKs' auth/missing-identifier), in the default signing mode.
    e = start_spec_server()
    try:
        s = Spec(e)
        status, message = err(exchange(s, unsigned({})))
        assert (status, message) == (400, "MISSING_IDENTIFIER")
    finally:
        assert e.stop() == 0


def test_forbidden_claims(spec):
    status, message = err(exchange(spec, '{"uid": "wow", "claims": {"firebase": "awesome"}}'))
    assert status == 400 and "FORBIDDEN_CLAIM : firebase" in message


def test_disabled_user(spec):
    local_id = spec.register_user(email=email(), password="notasecret")["localId"]
    spec.update_account_by_local_id(local_id, disableUser=True)
    assert err(exchange(spec, json.dumps({"uid": local_id, "claims": CLAIMS}))) == (400, "USER_DISABLED")


def test_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(exchange(spec, tenantId=tenant["tenantId"])) == (400, "PROJECT_DISABLED")


def test_tenant_id_mismatch(spec):
    tenant = spec.register_tenant(disableAuth=False)
    status, message = err(exchange(spec, unsigned({"uid": "someuid", "claims": CLAIMS, "tenant_id": "not-matching-tenant-id"}),
                                   tenantId=tenant["tenantId"]))
    assert status == 400 and "TENANT_ID_MISMATCH" in message


def test_new_account_in_tenant(spec):
    tenant = spec.register_tenant(disableAuth=False)
    r = exchange(spec, unsigned({"uid": "someuid", "claims": CLAIMS, "tenant_id": tenant["tenantId"]}), tenantId=tenant["tenantId"])
    assert r.status_code == 200 and r.json()["isNewUser"] is True, r.text
    assert spec.account_by_id_token(r.json()["idToken"], tenant["tenantId"])["tenantId"] == tenant["tenantId"]
    assert PROJECT_ID == "example"
