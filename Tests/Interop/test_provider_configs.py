"""Issues 25 and 27: the provider-configuration admin APIs (oauthIdpConfigs, inboundSamlConfigs,
defaultSupportedIdpConfigs) through firebase-admin, unmodified, and what `enabled: false` does to sign-in."""
import json
import urllib.parse

import pytest
import requests
from firebase_admin import auth, tenant_mgt

from conftest import credentialed_app, error_message

CERT = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----"


def idp_sign_in(emu, provider, sub, tenant=None):
    body = {"requestUri": "http://localhost", "returnSecureToken": True,
            "postBody": "providerId=%s&id_token=%s" % (provider, urllib.parse.quote(json.dumps({"sub": sub})))}
    if tenant:
        body["tenantId"] = tenant
    return emu.itk("signInWithIdp", body)


def test_oidc_round_trip_and_sign_in_switch(admin):
    emu, app = admin
    c = auth.create_oidc_provider_config("oidc.acme", client_id="cid", issuer="https://acme.example", display_name="Acme",
                                         enabled=True, app=app)
    assert (c.provider_id, c.client_id, c.issuer, c.display_name, c.enabled) == ("oidc.acme", "cid", "https://acme.example", "Acme", True)
    assert auth.get_oidc_provider_config("oidc.acme", app=app).issuer == "https://acme.example"
    assert idp_sign_in(emu, "oidc.acme", "u1").status_code == 200

    u = auth.update_oidc_provider_config("oidc.acme", enabled=False, display_name="Acme 2", app=app)
    assert (u.enabled, u.display_name, u.client_id) == (False, "Acme 2", "cid")  # the mask changed only those
    r = idp_sign_in(emu, "oidc.acme", "u1")
    assert r.status_code == 400 and error_message(r).startswith("OPERATION_NOT_ALLOWED")
    # Another provider, configured nowhere, still signs in (the official emulator's convenience).
    assert idp_sign_in(emu, "oidc.other", "u1").status_code == 200

    with pytest.raises(auth.ConfigurationNotFoundError):
        auth.get_oidc_provider_config("oidc.nope", app=app)
    with pytest.raises(Exception) as e:
        auth.create_oidc_provider_config("oidc.acme", client_id="cid", issuer="https://acme.example", app=app)
    assert "CONFIGURATION_EXISTS" in str(e.value)
    auth.delete_oidc_provider_config("oidc.acme", app=app)
    with pytest.raises(auth.ConfigurationNotFoundError):
        auth.delete_oidc_provider_config("oidc.acme", app=app)
    assert idp_sign_in(emu, "oidc.acme", "u1").status_code == 200


def test_saml_round_trip_and_listing_pages(admin):
    emu, app = admin
    for i in range(3):
        auth.create_saml_provider_config(f"saml.p{i}", idp_entity_id=f"idp{i}", sso_url="https://sso.example/x",
                                         x509_certificates=[CERT], rp_entity_id="rp", callback_url="https://cb.example/__/auth/handler",
                                         enabled=i != 1, app=app)
    s = auth.get_saml_provider_config("saml.p0", app=app)
    assert (s.idp_entity_id, s.sso_url, s.x509_certificates, s.rp_entity_id, s.enabled) == ("idp0", "https://sso.example/x", [CERT], "rp", True)
    page = auth.list_saml_provider_configs(max_results=2, app=app)
    assert [p.provider_id for p in page.provider_configs] == ["saml.p0", "saml.p1"] and page.has_next_page
    assert [p.provider_id for p in page.get_next_page().provider_configs] == ["saml.p2"]
    assert [p.provider_id for p in auth.list_saml_provider_configs(app=app).iterate_all()] == ["saml.p0", "saml.p1", "saml.p2"]
    auth.update_saml_provider_config("saml.p0", sso_url="https://sso2.example/y", app=app)
    s = auth.get_saml_provider_config("saml.p0", app=app)
    assert s.sso_url == "https://sso2.example/y" and s.idp_entity_id == "idp0"
    r = idp_sign_in(emu, "saml.p1", "s1")
    assert r.status_code == 400 and "OPERATION_NOT_ALLOWED" in error_message(r)


def test_default_supported_configs_over_rest(admin):
    emu, _ = admin
    base = f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/defaultSupportedIdpConfigs"
    h = {"Authorization": "Bearer owner"}
    r = requests.post(base + "?idpId=github.com", json={"enabled": False, "clientId": "gh", "clientSecret": "s"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "projects/demo-phone/defaultSupportedIdpConfigs/github.com", "enabled": False, "clientId": "gh", "clientSecret": "s"}
    gh = {"requestUri": "http://localhost", "postBody": "providerId=github.com&access_token=%7B%22sub%22%3A%22g%22%7D"}
    assert "OPERATION_NOT_ALLOWED" in error_message(emu.itk("signInWithIdp", gh))
    assert requests.patch(base + "/github.com?updateMask=enabled", json={"enabled": True}, headers=h).json()["enabled"] is True
    assert emu.itk("signInWithIdp", gh).status_code == 200
    # Production's own checks: a provider it does not support, the wrong kind of id, no id.
    assert "INVALID_PROVIDER_ID" in error_message(requests.post(base + "?idpId=myspace.com", json={}, headers=h))
    assert "INVALID_PROVIDER_ID" in error_message(requests.post(base + "?idpId=oidc.x", json={}, headers=h))
    assert "MISSING_PROVIDER_ID" in error_message(requests.post(base, json={}, headers=h))
    oidc = f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/oauthIdpConfigs"
    assert "MISSING_OAUTH_CLIENT_ID" in error_message(requests.post(oidc + "?oauthIdpConfigId=oidc.a", json={"issuer": "https://i"}, headers=h))
    assert "MISSING_ISSUER" in error_message(requests.post(oidc + "?oauthIdpConfigId=oidc.a", json={"clientId": "c"}, headers=h))
    assert "INVALID_CONFIG" in error_message(requests.post(oidc + "?oauthIdpConfigId=oidc.a", json={"clientId": "c", "issuer": "nope"}, headers=h))
    # Admin only, and never from a foreign web page.
    assert requests.get(base + "?key=k").status_code in (401, 403)
    assert requests.get(base, headers={**h, "Origin": "https://evil.example"}).status_code == 403
    supported = requests.get(f"{emu.url}/identitytoolkit.googleapis.com/v2/defaultSupportedIdps", headers=h).json()
    assert "google.com" in [i["idpId"] for i in supported["defaultSupportedIdps"]]


def test_tenant_configs_and_they_survive_a_restart(fresh, monkeypatch, tmp_path):
    emu = fresh("--data-dir", str(tmp_path))
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    with credentialed_app("idpcfg") as app:
        # Python's tenant_mgt CRUD always calls production: the tenant comes from the v2 REST API.
        r = requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", json={"displayName": "Idp-Tenant"},
                          headers={"Authorization": "Bearer owner"})
        t = tenant_mgt.Tenant(r.json())
        client = tenant_mgt.auth_for_tenant(t.tenant_id, app=app)
        client.create_oidc_provider_config("oidc.t", client_id="c", issuer="https://t.example", enabled=False)
        assert [p.provider_id for p in client.list_oidc_provider_configs().iterate_all()] == ["oidc.t"]
        assert list(auth.list_oidc_provider_configs(app=app).iterate_all()) == []  # the project's own are apart
        assert "OPERATION_NOT_ALLOWED" in error_message(idp_sign_in(emu, "oidc.t", "x", tenant=t.tenant_id))
        assert idp_sign_in(emu, "oidc.t", "x").status_code == 200
        with pytest.raises(tenant_mgt.TenantNotFoundError):
            tenant_mgt.auth_for_tenant("nosuch-tenant1", app=app).list_oidc_provider_configs().provider_configs
        emu.stop()
        emu2 = fresh("--data-dir", str(tmp_path), "--port", str(emu.port))
        assert emu2.port == emu.port
        assert client.get_oidc_provider_config("oidc.t").enabled is False
        assert "OPERATION_NOT_ALLOWED" in error_message(idp_sign_in(emu2, "oidc.t", "x", tenant=t.tenant_id))


def test_config_file_presets_and_hostile_bodies(fresh, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"projects": {"demo-phone": {"idpConfigs": {"apple.com": {"enabled": False}}}}}))
    emu = fresh("--config", str(cfg))
    r = idp_sign_in(emu, "apple.com", "a")
    assert "OPERATION_NOT_ALLOWED" in error_message(r)
    h = {"Authorization": "Bearer owner"}
    base = f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/oauthIdpConfigs"
    big = requests.post(base + "?oauthIdpConfigId=oidc.big", json={"clientId": "c", "issuer": "https://i", "x": "y" * 70000}, headers=h)
    assert big.status_code == 400 and "INVALID_CONFIG" in error_message(big)
    assert requests.post(base + "?oauthIdpConfigId=oidc.ok", json={"clientId": "c", "issuer": "https://i", "enabled": "yes"}, headers=h).status_code == 400
    assert requests.get(base + "/oidc.%0Aevil", headers=h).status_code == 400
    assert requests.get(f"{emu.url}/").status_code == 200
