"""Blocking functions (beforeCreate, beforeSignIn, beforeSendSms, beforeSendEmail) against a real function: a Python http.server on a
free loopback port that decodes the JWT as firebase-functions does in emulator mode (without verifying it) and
answers by path: one sets claims, displayName and session claims, one blocks with an HttpsError, one hangs past a
short configured deadline, one answers garbage."""
import concurrent.futures
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler

import jwt
import pytest
import requests

from conftest import FICTIONAL, claims_of, error_message, send_json, serve_in_background

OWNER = {"Authorization": "Bearer owner"}
HANG = threading.Event()


class Function(BaseHTTPRequestHandler):
    received = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        token = body["data"]["jwt"]
        payload = jwt.decode(token, options={"verify_signature": False})
        Function.received.append({"path": self.path, "payload": payload, "header": jwt.get_unverified_header(token), "raw": token,
                                  "contentType": self.headers.get("Content-Type")})
        if self.path == "/create":
            self.answer(200, {"userRecord": {"updateMask": "displayName,customClaims", "displayName": "Ada", "customClaims": {"role": "admin"}}})
        elif self.path == "/signin":
            self.answer(200, {"userRecord": {"updateMask": "sessionClaims", "sessionClaims": {"session": "s1"}}})
        elif self.path == "/block":
            self.answer(400, {"error": {"message": "No sign-ups today", "status": "INVALID_ARGUMENT"}})
        elif self.path == "/garbage":
            self.send_response(200)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"<garbage>")
        elif self.path == "/email-block":
            self.answer(200, {"recaptchaActionOverride": "BLOCK"})
        elif self.path == "/hang":
            HANG.wait(30)
            self.answer(200, {})
        else:
            self.answer(200, {})

    def answer(self, status, obj):
        send_json(self, status, obj)


@pytest.fixture
def function():
    Function.received = []
    HANG.clear()
    server = serve_in_background(Function)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    HANG.set()
    server.shutdown()
    server.server_close()


def configure(emu, base, triggers, project="demo-phone"):
    body = {"blockingFunctions": {"triggers": {k: {"functionUri": base + v} for k, v in triggers.items()}}}
    r = emu.session.patch(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/{project}/config",
                          params={"updateMask": "blockingFunctions"}, json=body, headers=OWNER)
    assert r.status_code == 200, r.text
    return r.json()


def paths():
    return [r["path"] for r in Function.received]


def test_config_errors_match_the_official_emulator(emu):
    url = f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"
    r = emu.session.patch(url, params={"updateMask": "blockingFunctions"}, headers=OWNER,
                          json={"blockingFunctions": {"triggers": {"beforeDelete": {"functionUri": "http://127.0.0.1/x"}}}})
    assert r.status_code == 400 and error_message(r) == "INVALID_BLOCKING_FUNCTION : ((Event type is invalid.))"
    r = emu.session.patch(url, params={"updateMask": "blockingFunctions"}, headers=OWNER,
                          json={"blockingFunctions": {"triggers": {"beforeCreate": {"functionUri": "nope"}}}})
    assert error_message(r) == "INVALID_BLOCKING_FUNCTION : ((Expected an absolute URI with valid scheme and host.))"


def test_phone_flow_calls_send_create_signin_and_the_token_carries_the_claims(fresh, function):
    emu = fresh()
    doc = configure(emu, function, {"beforeSendSms": "/ok", "beforeCreate": "/create", "beforeSignIn": "/signin"})
    assert doc["blockingFunctions"]["triggers"]["beforeCreate"]["functionUri"] == function + "/create"
    out = emu.sign_in()
    claims = claims_of(out["idToken"])
    assert claims["role"] == "admin" and claims["session"] == "s1" and claims["name"] == "Ada"
    assert paths() == ["/ok", "/create", "/signin"]
    sms, create, signin = (r["payload"] for r in Function.received)
    assert sms["event_type"] == "beforeSendSms" and sms["phone_number"] == FICTIONAL and sms["sms_type"] == "SIGNIN"
    assert create["event_type"] == "beforeCreate" and create["sign_in_method"] == "phone"
    assert create["iss"] == "https://securetoken.google.com/demo-phone" and create["aud"] == function + "/create"
    assert create["user_record"]["uid"] == out["localId"] == create["sub"]
    assert create["user_record"]["phone_number"] == FICTIONAL
    assert create["user_record"]["provider_data"] == [{"provider_id": "phone", "uid": FICTIONAL, "phone_number": FICTIONAL}]
    assert isinstance(create["user_record"]["metadata"]["creation_time"], int)
    assert signin["user_record"]["display_name"] == "Ada" and signin["user_record"]["custom_claims"] == {"role": "admin"}
    assert all(r["contentType"] == "application/json" for r in Function.received)
    # RS256 with our published key: a production-style verifier accepts it.
    header = Function.received[1]["header"]
    assert header["alg"] == "RS256"
    jwks = emu.session.get(f"{emu.url}/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")
    assert jwks.status_code == 200
    keys = {k["kid"]: k for k in jwks.json()["keys"]}
    assert header["kid"] in keys
    jwt.decode(_raw(1), jwt.PyJWK(keys[header["kid"]]).key, algorithms=["RS256"], audience=function + "/create",
               options={"verify_exp": False, "verify_iat": False})
    # Stored: displayName and custom claims, never the session claims.
    user = emu.itk("lookup", {"idToken": out["idToken"]}).json()["users"][0]
    assert user["displayName"] == "Ada" and json.loads(user["customAttributes"]) == {"role": "admin"}
    # Each call is logged with its event, URI, duration and outcome.
    emu.stop()
    log = emu.log()
    assert "blocking function beforeCreate" in log and f"uri={function}/create" in log and "ms=" in log and "outcome=" in log


def _raw(i):
    return Function.received[i]["raw"]


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_phone_sign_in_sees_the_claims(fresh, function):
    emu = fresh()
    configure(emu, function, {"beforeCreate": "/create", "beforeSignIn": "/signin"})
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "phone_flow.cjs")
    r = subprocess.run(["node", script], env={**os.environ, "EMULATOR_URL": emu.url}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["claims"]["role"] == "admin" and out["claims"]["session"] == "s1" and out["isNewUser"] is True
    assert paths() == ["/create", "/signin"]


def test_blocked_garbage_and_deadline(fresh, function):
    emu = fresh("--blocking-timeout-ms", "400")
    configure(emu, function, {"beforeCreate": "/block"})
    session = emu.send(FICTIONAL)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "123456"})
    assert r.status_code == 400
    assert error_message(r) == (f"BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to {function}/block returned HTTP error 400: "
                                '{"error": {"message": "No sign-ups today", "status": "INVALID_ARGUMENT"}}))')
    configure(emu, function, {"beforeCreate": "/garbage"})
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": emu.send(FICTIONAL), "code": "123456"})
    assert r.status_code == 500 and error_message(r) == "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Response body is not valid JSON.))"
    configure(emu, function, {"beforeCreate": "/hang"})
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": emu.send(FICTIONAL), "code": "123456"})
    assert r.status_code == 500
    assert error_message(r) == f"BLOCKING_FUNCTION_ERROR_RESPONSE : ((Deadline exceeded making request to {function}/hang.))"
    # No account was created by any of them.
    users = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:query", json={}, headers=OWNER)
    assert users.json().get("userInfo", []) == []


def test_before_send_sms_blocks_the_send(fresh, function):
    emu = fresh()
    configure(emu, function, {"beforeSendSms": "/block"})
    r = emu.itk("sendVerificationCode", {"phoneNumber": "+15557651234"})
    assert r.status_code == 400 and "No sign-ups today" in error_message(r)
    codes = emu.session.get(f"{emu.url}/emulator/v1/projects/demo-phone/verificationCodes").json()["verificationCodes"]
    assert codes == []


def firebase_functions_event(payload):
    """What firebase-functions' identity handler builds from the JWT (parseAuthEventContext): the v2 event's fields a
    beforeEmailSent handler reads."""
    mapped = "providers/cloud.auth/eventTypes/user." + payload["event_type"]
    return {"eventType": mapped + (":" + payload["sign_in_method"] if payload.get("sign_in_method") else ""),
            "emailType": payload.get("email_type"), "authType": "USER" if payload.get("user_record") else "UNAUTHENTICATED",
            "resource": {"name": "projects/demo-phone"}}


def test_before_send_email_runs_before_every_oob_email_and_can_refuse_it(fresh, function):
    emu = fresh()
    configure(emu, function, {"beforeSendEmail": "/ok"})
    up = emu.itk("signUp", {"email": "mail@example.com", "password": "secret12", "returnSecureToken": True}).json()
    oob = lambda body: emu.itk("sendOobCode", body)
    assert oob({"requestType": "PASSWORD_RESET", "email": "mail@example.com"}).status_code == 200
    assert oob({"requestType": "EMAIL_SIGNIN", "email": "link@example.com"}).status_code == 200
    assert oob({"requestType": "VERIFY_EMAIL", "idToken": up["idToken"]}).status_code == 200
    assert oob({"requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": up["idToken"], "newEmail": "moved@example.com"}).status_code == 200
    # The VERIFY_AND_CHANGE_EMAIL code applied: the old address is sent its RECOVER_EMAIL code, after the function.
    inbox = f"{emu.url}/emulator/v1/projects/demo-phone/oobCodes"
    change = [c for c in emu.session.get(inbox).json()["oobCodes"] if c["requestType"] == "VERIFY_AND_CHANGE_EMAIL"][0]
    r = emu.itk("update", {"oobCode": change["oobCode"]})
    assert r.status_code == 200 and r.json()["email"] == "moved@example.com", r.text
    payloads = [x["payload"] for x in Function.received]
    assert [(p["email_type"], p["email"]) for p in payloads] == [
        ("PASSWORD_RESET", "mail@example.com"), ("EMAIL_SIGN_IN", "link@example.com"), ("VERIFY_EMAIL", "mail@example.com"),
        ("VERIFY_AND_CHANGE_EMAIL", "mail@example.com"), ("RECOVER_EMAIL", "mail@example.com")]
    events = [firebase_functions_event(p) for p in payloads]
    assert events[0] == {"eventType": "providers/cloud.auth/eventTypes/user.beforeSendEmail", "emailType": "PASSWORD_RESET",
                         "authType": "USER", "resource": {"name": "projects/demo-phone"}}
    assert events[1]["authType"] == "UNAUTHENTICATED" and events[1]["emailType"] == "EMAIL_SIGN_IN"
    assert all(p["event_type"] == "beforeSendEmail" and p["aud"] == function + "/ok" for p in payloads)
    assert [c["requestType"] for c in emu.session.get(inbox).json()["oobCodes"]] == [
        "PASSWORD_RESET", "EMAIL_SIGNIN", "VERIFY_EMAIL", "RECOVER_EMAIL"]
    # recaptchaActionOverride BLOCK, and an HttpsError: refused, nothing stored.
    configure(emu, function, {"beforeSendEmail": "/email-block"})
    r = oob({"requestType": "PASSWORD_RESET", "email": "moved@example.com"})
    assert r.status_code == 400 and error_message(r).startswith("INVALID_RECAPTCHA_TOKEN"), r.text
    configure(emu, function, {"beforeSendEmail": "/block"})
    r = oob({"requestType": "EMAIL_SIGNIN", "email": "someone@example.com"})
    assert r.status_code == 400 and error_message(r) == (
        f"BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to {function}/block returned HTTP error 400: "
        '{"error": {"message": "No sign-ups today", "status": "INVALID_ARGUMENT"}}))')
    # An email change whose RECOVER_EMAIL the function refuses is refused as a whole: the account keeps its address.
    t = emu.itk("signInWithPassword", {"email": "moved@example.com", "password": "secret12"}).json()["idToken"]
    r = emu.itk("update", {"idToken": t, "email": "elsewhere@example.com"})
    assert r.status_code == 400 and "No sign-ups today" in error_message(r)
    assert emu.itk("signInWithPassword", {"email": "moved@example.com", "password": "secret12"}).status_code == 200
    assert len(emu.session.get(inbox).json()["oobCodes"]) == 4


def test_anonymous_email_password_and_mfa_flows_call_the_right_functions_in_order(fresh, function):
    emu = fresh()
    r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", headers=OWNER,
                         json={"localId": "m1", "email": "m@example.com", "password": "secret12", "emailVerified": True,
                               "mfaInfo": [{"phoneInfo": FICTIONAL}]})
    assert r.status_code == 200, r.text
    configure(emu, function, {"beforeCreate": "/create", "beforeSignIn": "/signin", "beforeSendSms": "/ok"})
    anon = emu.itk("signUp", {})
    assert anon.status_code == 200 and claims_of(anon.json()["idToken"])["session"] == "s1"
    email = emu.itk("signUp", {"email": "e@example.com", "password": "secret12"})
    assert email.status_code == 200 and claims_of(email.json()["idToken"])["role"] == "admin"
    assert [(r["path"], r["payload"]["sign_in_method"]) for r in Function.received] == [
        ("/create", "anonymous"), ("/signin", "anonymous"), ("/create", "password"), ("/signin", "password")]
    Function.received.clear()
    # MFA: password first (no beforeSignIn yet), the SMS (beforeSendSms), the second factor, then beforeSignIn.
    first = emu.itk("signInWithPassword", {"email": "m@example.com", "password": "secret12"}).json()
    assert "mfaPendingCredential" in first and paths() == []
    v2 = f"{emu.url}/identitytoolkit.googleapis.com/v2/accounts"
    start = emu.session.post(f"{v2}/mfaSignIn:start", params={"key": "k"},
                             json={"mfaPendingCredential": first["mfaPendingCredential"], "mfaEnrollmentId": first["mfaInfo"][0]["mfaEnrollmentId"]})
    assert start.status_code == 200, start.text
    done = emu.session.post(f"{v2}/mfaSignIn:finalize", params={"key": "k"},
                            json={"mfaPendingCredential": first["mfaPendingCredential"],
                                  "phoneVerificationInfo": {"sessionInfo": start.json()["phoneResponseInfo"]["sessionInfo"], "code": "123456"}})
    assert done.status_code == 200, done.text
    assert paths() == ["/ok", "/signin"]
    assert Function.received[0]["payload"]["sms_type"] == "MULTI_FACTOR_SIGN_IN"
    assert Function.received[1]["payload"]["sign_in_second_factor"] == "phone"
    claims = claims_of(done.json()["idToken"])
    assert claims["session"] == "s1" and claims["firebase"]["sign_in_second_factor"] == "phone"


def test_a_hanging_function_holds_nothing_else(fresh, function):
    """While a function hangs, GET / and sends for other projects all complete (counts, no timing)."""
    emu = fresh("--blocking-timeout-ms", "20000")
    configure(emu, function, {"beforeSendSms": "/hang"})
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        hanging = [pool.submit(requests.post, f"{emu.url}/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode",
                               params={"key": "k"}, json={"phoneNumber": f"+1555765{i:04d}"}, timeout=60) for i in range(2)]
        s = requests.Session()
        ok = 0
        for i in range(40):
            r = s.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", params={"key": "k"},
                       json={"phoneNumber": f"+1555766{i:04d}", "targetProjectId": f"other-{i % 4}"}, headers=OWNER, timeout=10)
            ok += r.status_code == 200
            ok += s.get(emu.url + "/", timeout=10).status_code == 200
        assert ok == 80
        assert not any(f.done() for f in hanging)
        HANG.set()
        assert [f.result().status_code for f in hanging] == [200, 200]


def test_custom_token_flow_calls_create_then_signin_and_the_token_carries_every_claim(admin, function):
    """firebase-admin (emulator mode) mints the custom token; REST signInWithCustomToken exchanges it: beforeCreate
    then beforeSignIn for a new uid, beforeSignIn alone for a known one, and a blocking beforeCreate saves no user."""
    from firebase_admin import auth as admin_auth
    emu, app = admin
    configure(emu, function, {"beforeCreate": "/create", "beforeSignIn": "/signin"})

    def exchange(uid, claims=None):
        token = admin_auth.create_custom_token(uid, claims, app=app)
        return emu.itk("signInWithCustomToken", {"token": token.decode() if isinstance(token, bytes) else token, "returnSecureToken": True})

    r = exchange("custom-fn-user", {"tier": "gold"})
    assert r.status_code == 200, r.text
    assert r.json()["isNewUser"] is True
    assert paths() == ["/create", "/signin"]
    create, signin = (x["payload"] for x in Function.received)
    assert [create["event_type"], signin["event_type"]] == ["beforeCreate", "beforeSignIn"]
    for p in (create, signin):
        assert p["sign_in_method"] == "custom"
        assert p["sub"] == p["user_record"]["uid"] == "custom-fn-user"
    assert signin["user_record"]["custom_claims"] == {"role": "admin"} and signin["user_record"]["display_name"] == "Ada"
    claims = claims_of(r.json()["idToken"])
    assert claims["sub"] == "custom-fn-user" and claims["firebase"]["sign_in_provider"] == "custom"
    assert claims["role"] == "admin", "the function's customClaims"
    assert claims["session"] == "s1", "the function's sessionClaims"
    assert claims["tier"] == "gold", "the custom token's claims"
    decoded = admin_auth.verify_id_token(r.json()["idToken"], app=app, check_revoked=True)
    assert decoded["uid"] == "custom-fn-user" and decoded["tier"] == "gold" and decoded["session"] == "s1"
    user = admin_auth.get_user("custom-fn-user", app=app)
    assert user.display_name == "Ada" and user.custom_claims == {"role": "admin"}

    # A second sign-in of the same uid: beforeSignIn only.
    Function.received.clear()
    again = exchange("custom-fn-user", {"tier": "silver"})
    assert again.status_code == 200, again.text
    assert again.json()["isNewUser"] is False
    assert paths() == ["/signin"]
    assert Function.received[0]["payload"]["sign_in_method"] == "custom"
    assert Function.received[0]["payload"]["user_record"]["uid"] == "custom-fn-user"
    claims = claims_of(again.json()["idToken"])
    assert (claims["role"], claims["session"], claims["tier"]) == ("admin", "s1", "silver")

    # A blocking beforeCreate for another uid: the HttpsError comes back and no user is saved.
    configure(emu, function, {"beforeCreate": "/block", "beforeSignIn": "/signin"})
    Function.received.clear()
    blocked = exchange("custom-fn-blocked", {"tier": "gold"})
    assert blocked.status_code == 400
    assert error_message(blocked) == (f"BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to {function}/block returned HTTP error 400: "
                                      '{"error": {"message": "No sign-ups today", "status": "INVALID_ARGUMENT"}}))')
    assert paths() == ["/block"], "beforeSignIn is not called after a blocked beforeCreate"
    assert Function.received[0]["payload"]["user_record"]["uid"] == "custom-fn-blocked"
    with pytest.raises(admin_auth.UserNotFoundError):
        admin_auth.get_user("custom-fn-blocked", app=app)
    # The known uid still signs in (its beforeCreate is not called again).
    Function.received.clear()
    assert exchange("custom-fn-user").status_code == 200 and paths() == ["/signin"]
