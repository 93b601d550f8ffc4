"""firebase-tools createAuthUri.spec.ts (accounts:createAuthUri), as raw HTTP against the release binary. The legacy
cases (what an email has) run with email enumeration protection off, the official emulator's default; production
turns it on for new projects, and so do we."""
import pytest

from spec_support import err, fake_idp, legacy, spec  # noqa: F401

URI = "http://example.com/"


@pytest.fixture(autouse=True)
def clean(spec):
    spec.reset()




def auth_uri(spec, identifier, **extra):
    return spec.itk("createAuthUri", {"continueUri": URI, "identifier": identifier, **extra})


def test_not_registered(spec, legacy):
    r = auth_uri(spec, "notregistered@example.com")
    assert r.status_code == 200 and r.json()["registered"] is False and isinstance(r.json()["sessionId"], str)


def test_no_registered_field_with_improved_privacy(spec):
    spec.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}}, "emailPrivacyConfig")
    r = auth_uri(spec, "notregistered@example.com")
    assert r.status_code == 200 and "registered" not in r.json() and isinstance(r.json()["sessionId"], str)


def test_providers_of_registered_user(spec, legacy):
    spec.register_user(email="alice@example.com", password="notasecret")
    r = auth_uri(spec, "alice@example.com")
    assert r.status_code == 200
    j = r.json()
    assert j["registered"] is True and j["allProviders"] == ["password"] and j["signinMethods"] == ["password"] and j["sessionId"]


def test_no_providers_with_improved_privacy(spec):
    spec.update_config({"emailPrivacyConfig": {"enableImprovedEmailPrivacy": True}}, "emailPrivacyConfig")
    spec.register_user(email="alice@example.com", password="notasecret")
    j = auth_uri(spec, "alice@example.com").json()
    assert "registered" not in j and "allProviders" not in j and "signinMethods" not in j and j["sessionId"]


def test_existing_session_id(spec, legacy):
    j = auth_uri(spec, "notregistered@example.com", sessionId="my-session-1").json()
    assert j["registered"] is False and j["sessionId"] == "my-session-1"


def test_email_case_is_ignored(spec, legacy):
    spec.register_user(email="alice@example.com", password="notasecret")
    assert auth_uri(spec, "AlIcE@exAMPle.COM").json()["registered"] is True



def linked_user(spec):
    id_token = fake_idp(spec, "12345", "alice@example.com")["idToken"]
    r = spec.itk("sendOobCode", {"email": "bob@example.com", "requestType": "EMAIL_SIGNIN", "returnOobLink": True}, owner=True)
    assert r.status_code == 200, r.text
    r = spec.itk("signInWithEmailLink", {"email": "bob@example.com", "oobCode": r.json()["oobCode"], "idToken": id_token})
    assert r.status_code == 200, r.text


def test_by_idp_email_or_top_level_email(spec, legacy):
    linked_user(spec)
    for addr in ["bob@example.com", "alice@example.com"]:
        j = auth_uri(spec, addr).json()
        assert j["registered"] is True, (addr, j)
        assert sorted(j["allProviders"]) == ["google.com", "password"] and sorted(j["signinMethods"]) == ["emailLink", "google.com"]


def test_no_idp_methods_with_duplicate_emails_allowed(spec, legacy):
    linked_user(spec)
    spec.emulator_config({"signIn": {"allowDuplicateEmails": True}})
    for addr in ["bob@example.com", "alice@example.com"]:
        j = auth_uri(spec, addr).json()
        assert j["registered"] is True and j["allProviders"] == ["password"] and j["signinMethods"] == ["emailLink"], (addr, j)


def test_missing_identifier_or_continue_uri(spec):
    assert err(spec.itk("createAuthUri", {"continueUri": URI})) == (400, "MISSING_IDENTIFIER")
    assert err(spec.itk("createAuthUri", {"identifier": "me@example.com"})) == (400, "MISSING_CONTINUE_URI")


def test_invalid_identifier(spec):
    assert err(spec.itk("createAuthUri", {"identifier": "invalid", "continueUri": "http://localhost/"})) == (400, "INVALID_IDENTIFIER")


def test_invalid_continue_uri(spec):
    assert err(spec.itk("createAuthUri", {"identifier": "me@example.com", "continueUri": "invalid"})) == (400, "INVALID_CONTINUE_URI")


def test_auth_disabled_tenant(spec):
    tenant = spec.register_tenant(disableAuth=True)
    assert err(auth_uri(spec, "notregistered@example.com", tenantId=tenant["tenantId"])) == (400, "PROJECT_DISABLED")
