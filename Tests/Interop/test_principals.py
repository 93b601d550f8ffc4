"""Issue 26: test principals (POST …/idTokens, `phone-auth token mint`), reset and snapshots against the release
binary: minted tokens are accepted by firebase-admin (verify_id_token(check_revoked=True)) and google-auth like any
signed-in user's, and refused like any other once revoked or deleted; resets and restores are durable with --data-dir
(kill -9 right after them)."""
import json
import os
import signal
import time

import pytest
import requests
from firebase_admin import auth, tenant_mgt
from google.auth.transport.requests import Request
from google.oauth2 import id_token

from conftest import Emulator, claims_of, credentialed_app
from test_cli import run as cli

X509 = "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
OWNER = {"Authorization": "Bearer owner"}
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "official_export")
P = "/emulator/v1/projects/demo-phone"


def mint(emu, tenant=None, **body):
    r = requests.post(emu.url + P + (f"/tenants/{tenant}" if tenant else "") + "/idTokens", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_firebase_admin_and_google_auth_accept_a_minted_principal(admin):
    emu, app = admin
    body = mint(emu, uid="alice", claims={"role": "admin", "org": {"id": 7}}, email="alice@example.com", emailVerified=True,
                signInProvider="password", secondFactor="totp", expiresIn=600)
    assert set(body) == {"idToken", "refreshToken", "expiresIn", "localId", "isNewUser"}
    assert body["localId"] == "alice" and body["isNewUser"] is True and body["expiresIn"] == "600"
    decoded = auth.verify_id_token(body["idToken"], app=app, check_revoked=True)
    assert decoded["uid"] == "alice" and decoded["role"] == "admin" and decoded["org"] == {"id": 7}
    assert decoded["email"] == "alice@example.com" and decoded["email_verified"] is True
    assert decoded["firebase"]["sign_in_provider"] == "password" and decoded["firebase"]["sign_in_second_factor"] == "totp"
    assert decoded["exp"] - decoded["iat"] == 600
    user = auth.get_user("alice", app=app)
    assert user.custom_claims == {"role": "admin", "org": {"id": 7}} and user.email_verified
    # The signature, against our published certificates (google-auth, as a production backend verifies).
    claims = id_token.verify_token(body["idToken"], Request(), audience="demo-phone", certs_url=emu.url + X509)
    assert claims["sub"] == "alice" and claims["role"] == "admin"
    # The same user again: updated, not new; the given fields change, the others stay.
    again = mint(emu, uid="alice", displayName="Alice", signInProvider="password")
    assert again["isNewUser"] is False
    user = auth.get_user("alice", app=app)
    assert user.display_name == "Alice" and user.email == "alice@example.com" and user.custom_claims == {"role": "admin", "org": {"id": 7}}


def test_a_revoked_or_deleted_principal_is_refused_like_any_other(admin):
    emu, app = admin
    body = mint(emu, uid="bob", phoneNumber="+15551110077", signInProvider="phone")
    assert auth.verify_id_token(body["idToken"], app=app, check_revoked=True)["phone_number"] == "+15551110077"
    time.sleep(1.1)
    auth.revoke_refresh_tokens("bob", app=app)
    with pytest.raises(auth.RevokedIdTokenError):
        auth.verify_id_token(body["idToken"], app=app, check_revoked=True)
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.json()["error"]["message"] == "TOKEN_EXPIRED"
    fresh = mint(emu, uid="bob", signInProvider="phone")
    assert auth.verify_id_token(fresh["idToken"], app=app, check_revoked=True)["uid"] == "bob"
    auth.delete_user("bob", app=app)
    with pytest.raises(auth.UserNotFoundError):
        auth.verify_id_token(fresh["idToken"], app=app, check_revoked=True)


def test_firebase_admin_in_production_mode_checks_the_signature(emu, monkeypatch):
    """No emulator variable: firebase-admin fetches our x509 certificates and checks the RS256 signature."""
    from firebase_admin import _token_gen
    monkeypatch.delenv("FIREBASE_AUTH_EMULATOR_HOST", raising=False)
    monkeypatch.setattr(_token_gen, "ID_TOKEN_CERT_URI", emu.url + X509)
    with credentialed_app("prod") as app:
        body = mint(emu, uid="carol", claims={"tier": "gold"})
        decoded = auth.verify_id_token(body["idToken"], app=app)
        assert decoded["uid"] == "carol" and decoded["tier"] == "gold" and decoded["firebase"]["sign_in_provider"] == "custom"
        h, p, s = body["idToken"].split(".")
        with pytest.raises(auth.InvalidIdTokenError):
            auth.verify_id_token(h + "." + p + "." + s[:-4] + "AAAA", app=app)


def test_a_tenants_principal(admin):
    emu, _ = admin
    with credentialed_app("tenant") as app:  # tenant_mgt insists on a credential (unused: FIREBASE_AUTH_EMULATOR_HOST is set)
        tenant_principal(emu, app)


def tenant_principal(emu, app):
    r = requests.post(emu.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", json={"displayName": "team"}, headers=OWNER)
    tid = r.json()["name"].rsplit("/", 1)[1]
    body = mint(emu, tenant=tid, uid="tu", phoneNumber="+15552220001", signInProvider="phone")
    tauth = tenant_mgt.auth_for_tenant(tid, app=app)
    decoded = tauth.verify_id_token(body["idToken"], check_revoked=True)
    assert decoded["firebase"]["tenant"] == tid and decoded["uid"] == "tu"
    with pytest.raises(Exception):
        auth.verify_id_token(body["idToken"], app=app, check_revoked=True)  # not a project token


def test_the_cli_mints_resets_and_snapshots(fresh):
    emu = fresh()
    r = cli(emu, "token", "mint", "dana", "--claims", '{"role":"ops"}', "--email", "dana@example.com", "--provider", "password",
            "--second-factor", "phone", "--expires-in", "120", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    c = claims_of(body["idToken"])
    assert c["role"] == "ops" and c["exp"] - c["iat"] == 120 and c["firebase"]["sign_in_second_factor"] == "phone"
    r = cli(emu, "token", "verify", body["idToken"])
    assert r.returncode == 0 and r.stdout.strip().endswith("valid"), r.stdout
    r = cli(emu, "token", "mint", "erin", "--tenant", "team-x", "--phone", "+15553330001", "--provider", "phone")
    assert r.returncode == 0 and "uid:" in r.stdout and "ID token:" in r.stdout, r.stderr
    assert claims_of(r.stdout.split("ID token:")[1].split()[0])["firebase"]["tenant"] == "team-x"
    r = cli(emu, "token", "mint", "x", "--claims", '{"sub":"no"}')
    assert r.returncode == 1 and "FORBIDDEN_CLAIM" in r.stderr
    assert cli(emu, "token", "mint", "x", "--expires-in", "soon").returncode == 64

    r = cli(emu, "snapshot", "save", "seeded", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["users"] == 2, r.stdout + r.stderr
    r = cli(emu, "reset")
    assert r.returncode == 0 and "users:" in r.stdout and "tenants: none" in r.stdout, r.stdout
    assert json.loads(cli(emu, "users", "list", "--json").stdout)["users"] == []
    r = cli(emu, "snapshot", "list")
    assert r.returncode == 0 and "seeded" in r.stdout
    r = cli(emu, "snapshot", "restore", "seeded", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tenants"] == ["team-x"], r.stdout
    assert [u["localId"] for u in json.loads(cli(emu, "users", "list", "--json").stdout)["users"]] == ["dana"]
    r = cli(emu, "snapshot", "restore", "nope")
    assert r.returncode == 1 and "NOT_FOUND" in r.stderr
    assert cli(emu, "snapshot", "delete", "seeded").returncode == 0
    assert "no snapshots" in cli(emu, "snapshot", "list").stdout
    requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 60})
    r = cli(emu, "reset", "--all", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["clock"]["offsetSeconds"] == 0, r.stdout


def kill_9(emu):
    emu.proc.send_signal(signal.SIGKILL)
    emu.proc.wait()
    emu.session.close()


def uids(emu, tenant=None):
    path = "/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (f"/tenants/{tenant}" if tenant else "") + "/accounts:batchGet"
    return sorted(u["localId"] for u in requests.get(emu.url + path, params={"maxResults": 1000}, headers=OWNER).json().get("users", []))


def test_a_reset_is_durable_and_returns_to_the_import_not_to_older_data(tmp_path):
    data = str(tmp_path / "data")
    # An earlier run left a user in the data directory: it is not part of the starting state of the next run.
    first = Emulator(["--data-dir", data])
    mint(first, uid="from-an-earlier-run")
    assert first.stop() == 0

    emu = Emulator(["--data-dir", data, "--import", FIXTURE])
    imported = uids(emu)
    tenant = "team-a-x1y2z"
    imported_tenant = uids(emu, tenant)
    assert "from-an-earlier-run" in imported and imported_tenant
    mint(emu, uid="principal", phoneNumber="+15554440001", signInProvider="phone")
    mint(emu, tenant=tenant, uid="tenant-principal")
    requests.patch(emu.url + P + "/config", json={"phoneAuth": {"codeLength": 8}})
    requests.post(emu.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", json={"displayName": "later"}, headers=OWNER)
    r = requests.post(emu.url + P + ":reset")
    assert r.status_code == 200, r.text
    assert r.json()["tenants"] == [tenant]
    start_users = sorted(set(imported) - {"from-an-earlier-run"})
    assert r.json()["users"] == len(start_users)
    kill_9(emu)  # at once: the acknowledged reset is on disk

    # Restarted without --import: exactly the reset state comes back from the data directory.
    again = Emulator(["--data-dir", data])
    try:
        assert uids(again) == start_users
        assert uids(again, tenant) == imported_tenant
        tenants = requests.get(again.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", headers=OWNER).json().get("tenants", [])
        assert [t["name"].rsplit("/", 1)[1] for t in tenants] == [tenant]
        assert requests.get(again.url + P + "/config").json()["phoneAuth"]["codeLength"] == 6

        # A restore is durable too; the snapshots themselves live in memory.
        principal = mint(again, uid="kept", claims={"k": 1})
        assert requests.post(again.url + P + ":snapshot", json={"name": "s"}).status_code == 200
        assert requests.post(again.url + P + ":reset").status_code == 200
        assert "kept" not in uids(again)
        r = requests.post(again.url + P + ":restore", json={"name": "s"})
        assert r.status_code == 200, r.text
        kill_9(again)
    finally:
        again.stop()
    last = Emulator(["--data-dir", data])
    try:
        assert "kept" in uids(last)
        r = last.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": principal["refreshToken"]})
        assert r.status_code == 200 and claims_of(r.json()["id_token"])["k"] == 1, r.text
        assert requests.get(last.url + P + "/snapshots").json()["snapshots"] == []
    finally:
        assert last.stop() == 0
