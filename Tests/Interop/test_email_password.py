"""Issue 13: email + password accounts and out-of-band codes against the release binary — firebase-admin (Python,
emulator mode, unmodified) for the admin side, plain requests for the client REST calls the SDKs make."""
import json
import os
import shutil
import subprocess
import signal
import urllib.parse
import uuid

import pytest
import requests
from firebase_admin import auth

from conftest import Emulator, claims_of, error_message


def oob_codes(emu, email=None):
    params = {"email": email} if email else {}
    r = requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/oobCodes", params=params)
    assert r.status_code == 200, r.text
    return r.json()["oobCodes"]


def sign_in(emu, email, password):
    return emu.itk("signInWithPassword", {"email": email, "password": password, "returnSecureToken": True})


def test_admin_create_user_with_password_then_client_sign_in(admin):
    emu, app = admin
    u = auth.create_user(email="Ada@Example.com", password="secret-ada", app=app)
    got = auth.get_user_by_email("ada@example.com", app=app)
    assert got.uid == u.uid and not got.email_verified
    assert [p.provider_id for p in got.provider_data] == ["password"]
    r = sign_in(emu, "ada@example.com", "secret-ada")
    assert r.status_code == 200, r.text
    c = claims_of(r.json()["idToken"])
    assert c["firebase"]["sign_in_provider"] == "password" and c["user_id"] == u.uid
    assert error_message(sign_in(emu, "ada@example.com", "wrong-one")) == "INVALID_LOGIN_CREDENTIALS"
    assert error_message(sign_in(emu, "nobody@example.com", "secret-ada")) == "INVALID_LOGIN_CREDENTIALS"
    with pytest.raises(auth.EmailAlreadyExistsError):
        auth.create_user(email="ada@example.com", password="secret-ada", app=app)
    # The admin record carries a hash and salt, never the password; verify_id_token accepts the token.
    listed = [x for x in auth.list_users(app=app).iterate_all() if x.uid == u.uid][0]
    assert listed.password_hash and listed.password_salt and "secret-ada" not in listed.password_hash
    assert auth.verify_id_token(r.json()["idToken"], app=app)["uid"] == u.uid


def test_generated_links_verify_email_and_reset_password(admin):
    emu, app = admin
    u = auth.create_user(email="bo@example.com", password="secret-bo", app=app)
    link = auth.generate_email_verification_link("bo@example.com", app=app)
    code = urllib.parse.parse_qs(urllib.parse.urlparse(link).query)["oobCode"][0]
    assert [c["oobCode"] for c in oob_codes(emu, "bo@example.com")] == [code]
    r = emu.itk("update", {"oobCode": code})
    assert r.status_code == 200 and r.json()["emailVerified"] is True, r.text
    assert auth.get_user(u.uid, app=app).email_verified
    assert error_message(emu.itk("update", {"oobCode": code})) == "INVALID_OOB_CODE"

    reset = auth.generate_password_reset_link("bo@example.com", app=app)
    code = urllib.parse.parse_qs(urllib.parse.urlparse(reset).query)["oobCode"][0]
    assert emu.itk("resetPassword", {"oobCode": code}).json()["email"] == "bo@example.com"
    assert emu.itk("resetPassword", {"oobCode": code, "newPassword": "secret-new"}).status_code == 200
    assert sign_in(emu, "bo@example.com", "secret-new").status_code == 200
    assert error_message(sign_in(emu, "bo@example.com", "secret-bo")) == "INVALID_LOGIN_CREDENTIALS"
    with pytest.raises(auth.UserNotFoundError):
        auth.generate_email_verification_link("nobody@example.com", app=app)


def test_client_rest_flow_with_inbox_and_wait(emu):
    email = f"c-{uuid.uuid4().hex[:8]}@example.com"
    up = emu.itk("signUp", {"email": email, "password": "secret-c", "returnSecureToken": True}).json()
    assert claims_of(up["idToken"])["firebase"]["identities"]["email"] == [email]
    # Email enumeration protection (the default): createAuthUri says nothing about the email.
    r = emu.itk("createAuthUri", {"identifier": email, "continueUri": "http://localhost"}).json()
    assert "registered" not in r and "signinMethods" not in r and r["sessionId"]
    assert emu.itk("sendOobCode", {"requestType": "VERIFY_EMAIL", "idToken": up["idToken"]}).status_code == 200
    waited = requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/oobCodes:wait",
                          params={"email": email, "timeoutSeconds": "5"}, timeout=10)
    assert waited.status_code == 200 and waited.json()["requestType"] == "VERIFY_EMAIL"
    assert waited.json()["oobLink"].startswith(emu.url + "/emulator/action?mode=verifyEmail")
    assert emu.itk("update", {"oobCode": waited.json()["oobCode"]}).json()["emailVerified"] is True
    signed = sign_in(emu, email, "secret-c").json()
    assert claims_of(signed["idToken"])["email_verified"] is True
    timed_out = requests.get(f"{emu.url}/emulator/v1/projects/demo-phone/oobCodes:wait",
                             params={"email": "late@example.com", "timeoutSeconds": "0.2"}, timeout=10)
    assert timed_out.status_code == 404


def test_password_users_and_codes_survive_kill_9(tmp_path):
    data = str(tmp_path / "data")
    e = Emulator(["--data-dir", data])
    try:
        assert e.itk("signUp", {"email": "d@example.com", "password": "secret-d"}).status_code == 200
        assert e.itk("sendOobCode", {"requestType": "PASSWORD_RESET", "email": "d@example.com"}).status_code == 200
        code = oob_codes(e)[0]["oobCode"]
        assert "secret-d" not in e.log()
    finally:
        e.stop(sig=signal.SIGKILL)
    e = Emulator(["--data-dir", data])
    try:
        assert [c["oobCode"] for c in oob_codes(e)] == [code]
        assert sign_in(e, "d@example.com", "secret-d").status_code == 200
        assert e.itk("resetPassword", {"oobCode": code, "newPassword": "secret-e"}).status_code == 200
        assert sign_in(e, "d@example.com", "secret-e").status_code == 200
    finally:
        assert e.stop() == 0


def test_export_import_keeps_passwords_and_reads_official_exports(tmp_path, fresh):
    export = tmp_path / "exp"
    e = fresh("--export-on-exit", str(export))
    assert e.itk("signUp", {"email": "x@example.com", "password": "secret-x"}).status_code == 200
    assert e.stop() == 0
    accounts = json.loads((export / "auth_export" / "accounts.json").read_text())
    user = accounts["users"][0]
    assert user["passwordHash"] and user["salt"] and "secret-x" not in json.dumps(accounts)
    # An official-emulator record (firebase-tools writes fakeHash:salt=…:password=…) next to ours.
    accounts["users"].append({"localId": "official1", "email": "o@example.com", "salt": "fakeSaltXYZ",
                              "passwordHash": "fakeHash:salt=fakeSaltXYZ:password=secret-o", "createdAt": "1700000000000"})
    (export / "auth_export" / "accounts.json").write_text(json.dumps(accounts))
    e2 = fresh("--import", str(export))
    assert sign_in(e2, "x@example.com", "secret-x").status_code == 200
    assert sign_in(e2, "o@example.com", "secret-o").status_code == 200


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_email_flow(emu):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "email_flow.cjs")
    email = f"js-{uuid.uuid4().hex[:8]}@example.com"
    r = subprocess.run(["node", script, email], env={**os.environ, "EMULATOR_URL": emu.url}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["sameUser"] and out["email"] == email and out["emailVerified"] and not out["isAnonymous"]
    assert out["providerData"] == ["password"] and out["checkedOperation"] == "VERIFY_EMAIL"
    # Email enumeration protection (on by default, production's default for new projects): createAuthUri says nothing
    # about the email, so fetchSignInMethodsForEmail answers [] as it does against production.
    assert out["methods"] == [] and out["wrong"] == "auth/invalid-credential"
    assert out["signInProvider"] == "password" and out["claims"]["email_verified"] is True
