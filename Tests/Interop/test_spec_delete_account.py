"""firebase-tools deleteAccount.spec.ts (accounts:delete), as raw HTTP against the release binary; the federated case
signs in through the official emulator's fake IdP credential (an id_token JSON)."""
import pytest

from spec_support import err, fake_idp, has_error, spec  # noqa: F401

USER = {"email": "alice@example.com", "password": "notasecret"}


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()


def test_deletes_user_of_id_token(spec):
    id_token = spec.register_user(**USER)["idToken"]
    r = spec.itk("delete", {"idToken": id_token})
    assert r.status_code == 200 and "error" not in r.json()
    spec.expect_user_not_exists(id_token)


def test_local_id_without_oauth(spec):
    local_id = spec.register_user(**USER)["localId"]
    assert err(spec.itk("delete", {"localId": local_id})) == (400, "MISSING_ID_TOKEN")



def test_removes_federated_accounts(spec):
    first = fake_idp(spec, "12345", "alice@example.com")
    r = spec.itk("delete", {"idToken": first["idToken"]})
    assert r.status_code == 200 and "error" not in r.json()
    again = fake_idp(spec, "12345", "alice@example.com")
    assert again["localId"] != first["localId"]


def test_admin_deletes_by_local_id(spec):
    up = spec.register_user(**USER)
    r = spec.itk("delete", {"localId": up["localId"]}, owner=True)
    assert r.status_code == 200 and "error" not in r.json()
    spec.expect_user_not_exists(up["idToken"])


def test_admin_without_local_id(spec):
    id_token = spec.register_user(**USER)["idToken"]
    assert err(spec.itk("delete", {"idToken": id_token}, owner=True)) == (400, "MISSING_LOCAL_ID")


def test_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert has_error(spec.itk("delete", {"tenantId": tenant["tenantId"]}), "PROJECT_DISABLED")
