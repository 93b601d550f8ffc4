"""firebase-tools rest.spec.ts (REST mapping and authentication), as raw HTTP against the release binary."""
import pytest

from spec_support import PROJECT_ID, V3, err, spec  # noqa: F401

SIGN_UP = "/identitytoolkit.googleapis.com/v1/accounts:signUp"


def test_status_check(spec):
    r = spec.s.get(spec.url + "/")
    assert r.status_code == 200 and isinstance(r.json()["authEmulator"], dict)


def test_cross_origin_preflight(spec):
    # On a client-facing Google endpoint (open to any origin, as production). A preflight naming Authorization from a
    # foreign origin is refused here: admin calls take browser requests only from local origins (docs/differences.md).
    headers = {"Origin": "http://example.com", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "X-Client-Version,X-Whatever-Header", "Access-Control-Request-Private-Network": "true"}
    r = spec.s.options(spec.url + SIGN_UP, headers=headers)
    assert r.status_code in (200, 204), r.text
    assert r.headers["access-control-allow-origin"] == "http://example.com"
    # Header names are case-insensitive (they come back lower-cased here).
    assert sorted(h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")) == ["x-client-version", "x-whatever-header"]
    # Private Network Access (a public page reaching this loopback server) only for allowed origins (docs/differences.md).
    assert "access-control-allow-private-network" not in r.headers
    r = spec.s.options(spec.url + SIGN_UP, headers={**headers, "Access-Control-Request-Headers": "Authorization,X-Client-Version"})
    assert r.status_code == 403
    r = spec.s.options(spec.url + SIGN_UP, headers={**headers, "Origin": "http://localhost:5173", "Access-Control-Request-Headers": "Authorization,X-Client-Version"})
    assert r.status_code in (200, 204) and r.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert r.headers["access-control-allow-private-network"] == "true"


@pytest.mark.parametrize("path", ["/identitytoolkit.googleapis.com/v1/accounts:sendOobCode", f"{V3}/getOobConfirmationCode"])
def test_integer_enum_values(spec, path):
    # 6: EMAIL_SIGNIN, as the Android SDK sends it.
    r = spec.s.post(spec.url + path, json={"email": "bob@example.com", "requestType": 6, "returnOobLink": True},
                    headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200 and "mode=signIn" in r.json()["oobLink"], r.text


def test_numbers_for_int64_fields(spec):
    r = spec.itk("update", {"localId": "nosuch", "validSince": 1611780718}, owner=True)
    assert err(r) == (400, "USER_NOT_FOUND")


def test_no_api_key(spec):
    r = spec.post(SIGN_UP, {"returnSecureToken": True}, key=None)
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"


def test_api_key_as_query_or_header(spec):
    assert "error" not in spec.post(SIGN_UP, {}).json()
    assert "error" not in spec.post(SIGN_UP, {}, key=None, headers={"x-goog-api-key": "fake-api-key"}).json()


def test_non_bearer_authorization_is_ignored(spec):
    r = spec.post(SIGN_UP, {"returnSecureToken": True}, key=None, headers={"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"})
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"


@pytest.mark.parametrize("auth", ["Bearer owner", "bEArEr OWNER"])
def test_bearer_owner(spec, auth):
    r = spec.post(SIGN_UP, {"targetProjectId": "example2"}, key=None, headers={"Authorization": auth})
    assert r.status_code == 200 and "error" not in r.json(), r.text


def test_production_access_token_format(spec):
    # The official emulator takes any "ya29." access token as the owner's (the format only).
    r = spec.post(SIGN_UP, {"targetProjectId": "example2"}, key=None,
                  headers={"Authorization": "Bearer ya" + "29.AHES0ZZZZZ0fff" + "ff0XXXX0mmmm0wwwww0-LL_l-0bb0b0bbbbbb"})
    assert r.status_code == 200 and "error" not in r.json(), r.text


def test_target_project_id_needs_oauth(spec):
    assert err(spec.post(SIGN_UP, {"targetProjectId": "example2"})) == \
        (400, "INSUFFICIENT_PERMISSION : Only authenticated requests can specify target_project_id.")


def test_tenant_mismatch_body_and_path(spec):
    r = spec.s.post(f"{spec.url}/identitytoolkit.googleapis.com/v1/projects/project-id/tenants/tenant-id/accounts:delete",
                    json={"localId": "local-id", "tenantId": "mismatching-tenant-id"}, headers={"Authorization": "Bearer owner"})
    assert err(r) == (400, "TENANT_ID_MISMATCH")


def tenant_user(spec):
    tenant = spec.register_tenant(disableAuth=False, allowPasswordSignup=True)
    return spec.register_user(email="alice@example.com", password="notasecret", tenantId=tenant["tenantId"])["idToken"]


def test_tenant_mismatch_token_and_path(spec):
    id_token = tenant_user(spec)
    r = spec.s.post(f"{spec.url}/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}/tenants/not-matching-tenant-id/accounts:lookup",
                    json={"idToken": id_token}, headers={"Authorization": "Bearer owner"})
    assert err(r) == (400, "TENANT_ID_MISMATCH")


def test_tenant_mismatch_token_and_body(spec):
    id_token = tenant_user(spec)
    r = spec.s.post(f"{spec.url}/identitytoolkit.googleapis.com/v1/projects/{PROJECT_ID}/accounts:lookup",
                    json={"idToken": id_token, "tenantId": "not-matching-tenant-id"}, headers={"Authorization": "Bearer owner"})
    assert err(r) == (400, "TENANT_ID_MISMATCH")
