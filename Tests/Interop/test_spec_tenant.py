"""firebase-tools tenant.spec.ts (tenant management), as raw HTTP against the release binary."""
import pytest

from spec_support import ITK2, OWNER, err, spec  # noqa: F401

BASE = f"{ITK2}/projects/project-id/tenants"
FULL = {
    "allowPasswordSignup": True, "disableAuth": False, "displayName": "display", "enableAnonymousUser": True,
    "enableEmailLinkSignin": True, "mfaConfig": {"enabledProviders": ["PROVIDER_UNSPECIFIED", "PHONE_SMS"], "state": "ENABLED"},
}


def project(spec, name):
    """A project of its own per test: the official specs start each from an empty state."""
    return f"{ITK2}/projects/{name}/tenants"


def create(spec, base, body):
    r = spec.s.post(spec.url + base, json=body, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()


def expect_full(t):
    for k, v in FULL.items():
        assert t[k] == v, (k, t)


def test_creates_tenants(spec):
    t = create(spec, BASE, FULL)
    expect_full(t)
    assert t["tenantId"] and t["name"] == f"projects/project-id/tenants/{t['tenantId']}"


def test_creates_tenant_with_defaults(spec):
    t = create(spec, BASE, {})
    assert t["disableAuth"] is False and t["enableEmailLinkSignin"] is False
    assert t["mfaConfig"] == {"state": "DISABLED", "enabledProviders": []}
    # Deliberate difference (docs/differences.md): password and anonymous sign-in are on in a new tenant here.
    assert t["allowPasswordSignup"] is True and t["enableAnonymousUser"] is True


def test_gets_tenants(spec):
    t = create(spec, BASE, {})
    r = spec.s.get(f"{spec.url}{BASE}/{t['tenantId']}", headers=OWNER)
    assert r.status_code == 200 and r.json() == t


def test_get_of_unknown_tenant(spec):
    # The official emulator creates the tenant on a get; production (and we) answer TENANT_NOT_FOUND, and a read
    # never creates anything (docs/differences.md).
    base = project(spec, "project-get")
    r = spec.s.get(spec.url + base, headers=OWNER)
    assert r.status_code == 200 and r.json().get("tenants", []) == []
    assert err(spec.s.get(f"{spec.url}{base}/tenant-id", headers=OWNER)) == (404, "TENANT_NOT_FOUND")
    assert spec.s.get(spec.url + base, headers=OWNER).json().get("tenants", []) == []


@pytest.mark.parametrize("with_body", [False, True])
def test_deletes_tenants(spec, with_body):
    t = create(spec, BASE, {})
    kw = {"json": {}} if with_body else {}
    r = spec.s.delete(f"{spec.url}{BASE}/{t['tenantId']}", headers=OWNER, **kw)
    assert r.status_code == 200, r.text
    assert err(spec.s.get(f"{spec.url}{BASE}/{t['tenantId']}", headers=OWNER))[1] == "TENANT_NOT_FOUND"


def test_lists_tenants_and_pages(spec):
    base = project(spec, "project-list")
    ids = sorted(create(spec, base, {})["tenantId"] for _ in range(2))
    r = spec.s.get(spec.url + base, headers=OWNER).json()
    assert sorted(t["tenantId"] for t in r["tenants"]) == ids and "nextPageToken" not in r
    first = spec.s.get(spec.url + base, headers=OWNER, params={"pageSize": 1}).json()
    assert [t["tenantId"] for t in first["tenants"]] == ids[:1] and isinstance(first["nextPageToken"], str)
    second = spec.s.get(spec.url + base, headers=OWNER, params={"pageToken": first["nextPageToken"]}).json()
    assert [t["tenantId"] for t in second["tenants"]] == ids[1:] and "nextPageToken" not in second
    # A full last page: the official emulator still hands out a token (whose page is empty); production only when
    # more follow. Either way the walk ends with the two tenants.
    full = spec.s.get(spec.url + base, headers=OWNER, params={"pageSize": 2}).json()
    assert [t["tenantId"] for t in full["tenants"]] == ids
    if "nextPageToken" in full:
        rest = spec.s.get(spec.url + base, headers=OWNER, params={"pageToken": full["nextPageToken"]}).json()
        assert rest.get("tenants", []) == [] and "nextPageToken" not in rest


def patch(spec, tid, body, mask=None):
    r = spec.s.patch(f"{spec.url}{BASE}/{tid}", json=body, headers=OWNER, params={"updateMask": mask} if mask else {})
    assert r.status_code == 200, r.text
    return r.json()


def test_updates_tenant_config_with_mask(spec):
    t = create(spec, BASE, {})
    expect_full(patch(spec, t["tenantId"], FULL, "allowPasswordSignup,disableAuth,displayName,enableAnonymousUser,enableEmailLinkSignin,mfaConfig"))


def test_masked_field_missing_from_body(spec):
    t = create(spec, BASE, {})
    assert "displayName" not in patch(spec, t["tenantId"], {}, "displayName")


def test_mask_indexing_a_primitive_or_array_changes_nothing(spec):
    t = create(spec, BASE, {"displayName": "display", "mfaConfig": {"enabledProviders": ["PROVIDER_UNSPECIFIED", "PHONE_SMS"]}})
    r = patch(spec, t["tenantId"], {"displayName": "unused", "mfaConfig": {"enabledProviders": ["PROVIDER_UNSPECIFIED"]}},
              "displayName.0,mfaConfig.enabledProviders.nonexistentField")
    assert r["displayName"] == "display" and r["mfaConfig"]["enabledProviders"] == ["PROVIDER_UNSPECIFIED", "PHONE_SMS"]


def test_full_update_without_mask(spec):
    t = create(spec, BASE, {})
    expect_full(patch(spec, t["tenantId"], FULL))


def test_full_update_of_an_empty_body(spec):
    # Without a mask every settable field is replaced (production's tenants.patch): an empty body is the defaults.
    t = create(spec, BASE, FULL)
    r = patch(spec, t["tenantId"], {})
    assert [r[k] for k in ("allowPasswordSignup", "disableAuth", "enableAnonymousUser", "enableEmailLinkSignin")] == [False] * 4
    assert r["mfaConfig"] == {"enabledProviders": [], "state": "DISABLED"} and "displayName" not in r
