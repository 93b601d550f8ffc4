"""reCAPTCHA SMS defense and carrier delivery (issue 28) against the release binary: the REST surface, and the real
JS SDK 12.14 phone flow under each phoneEnforcementState (what its emulator mode sends, what we answer) and its MFA
sends."""
import json
import os
import shutil
import subprocess

import pytest
import requests

from conftest import FICTIONAL, error_message

HERE = os.path.dirname(os.path.abspath(__file__))
P = "/emulator/v1/projects/demo-phone"
REAL = "+15557650101"
needs_sdk = pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")


def configure(e, body):
    r = e.session.patch(e.url + P + "/config", json=body)
    assert r.status_code == 200, r.text


def events(e, type_):
    r = requests.get(e.url + P + "/events", params={"format": "jsonl", "follow": "false", "since": "0", "type": type_}, timeout=10)
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def mint(e, **kw):
    r = e.session.post(e.url + P + "/appCredentials", json={"type": "RECAPTCHA_ENTERPRISE", **kw})
    assert r.status_code == 200, r.text
    return r.json()["token"]


def inbox(e, phone):
    return e.session.get(e.url + P + "/verificationCodes", params={"phoneNumber": phone}).json()["verificationCodes"]


def enterprise_send(e, phone, token, **kw):
    return e.itk("sendVerificationCode", {"phoneNumber": phone, "captchaResponse": token, "clientType": "CLIENT_TYPE_WEB",
                                          "recaptchaVersion": "RECAPTCHA_ENTERPRISE", **kw})


def test_rest_enforce_audit_and_the_served_config(fresh):
    e = fresh()
    configure(e, {"recaptchaConfig": {"phoneEnforcementState": "ENFORCE", "useSmsBotScore": True,
                                      "managedRules": [{"endScore": 0.3, "action": "BLOCK"}]}})
    cfg = e.session.get(e.url + "/identitytoolkit.googleapis.com/v2/recaptchaConfig",
                        params={"key": "k", "clientType": "CLIENT_TYPE_WEB", "version": "RECAPTCHA_ENTERPRISE"}).json()
    assert {"provider": "PHONE_PROVIDER", "enforcementState": "ENFORCE"} in cfg["recaptchaEnforcementState"]
    assert cfg["useSmsBotScore"] is True and cfg["recaptchaKey"].startswith("projects/demo-phone/keys/")
    assert error_message(e.itk("sendVerificationCode", {"phoneNumber": REAL})) == "MISSING_RECAPTCHA_TOKEN"
    assert error_message(enterprise_send(e, REAL, "forged")) == "INVALID_RECAPTCHA_TOKEN"
    r = enterprise_send(e, REAL, mint(e, score=0.2))
    assert r.status_code == 400 and error_message(r).startswith("INVALID_APP_CREDENTIAL")
    assert enterprise_send(e, REAL, mint(e, score=0.8, action="sendVerificationCode")).status_code == 200
    assert e.itk("sendVerificationCode", {"phoneNumber": FICTIONAL}).status_code == 200, "fictional numbers are exempt"
    verdicts = [(v["verdict"], v["reason"]) for v in events(e, "recaptcha.assessed")]
    assert verdicts == [("BLOCKED", "MISSING_RECAPTCHA_TOKEN"), ("BLOCKED", "INVALID_RECAPTCHA_TOKEN"), ("BLOCKED", "BOT_SCORE"),
                        ("ALLOWED", "PASSED")]
    configure(e, {"recaptchaConfig": {"phoneEnforcementState": "AUDIT"}})
    assert e.itk("sendVerificationCode", {"phoneNumber": REAL}).status_code == 200
    assert events(e, "recaptcha.assessed")[-1]["verdict"] == "WOULD_BLOCK"


def test_rest_late_lost_and_rejected_sms_on_the_emulator_clock(fresh):
    e = fresh()
    configure(e, {"phoneAuth": {"delivery": {"+1555765": {"delaySeconds": 45}, "+15557650199": {"outcome": "LOST"},
                                             "+447700": {"outcome": "REJECTED"}}}})
    session = e.send(REAL)
    assert inbox(e, REAL) == []
    r = e.session.get(e.url + P + "/verificationCodes:wait", params={"phoneNumber": REAL, "timeoutSeconds": "0"})
    assert r.status_code == 404
    assert [x["outcome"] for x in events(e, "sms.delivery")] == ["DELAYED"]
    assert events(e, "code.sent") == []
    assert e.session.post(e.url + "/emulator/v1/clock:advance", json={"seconds": 45}).status_code == 200
    assert [c["sessionInfo"] for c in inbox(e, REAL)] == [session]
    assert [x["sessionInfo"] for x in events(e, "code.sent")] == [session]
    # The code works once it has arrived (and would have before: the session was valid all along).
    code = inbox(e, REAL)[0]["code"]
    assert e.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": code}).status_code == 200
    # Lost: 200, never in the inbox.
    e.send("+15557650199")
    e.session.post(e.url + "/emulator/v1/clock:advance", json={"seconds": 86400})
    assert inbox(e, "+15557650199") == []
    # Rejected: production's 503.
    r = e.itk("sendVerificationCode", {"phoneNumber": "+447700900123"})
    assert r.status_code == 503 and r.json()["error"]["message"] == "Error code: 39"
    assert r.json()["error"]["status"] == "UNAVAILABLE"


def test_late_sms_still_arrives_after_a_restart_from_the_data_dir(fresh, tmp_path):
    """A late SMS pending when the server stops arrives at its time after the restart: the long-poll is answered and
    the code.sent event published then, not only the inbox (its timer is re-armed from the journal)."""
    import threading
    import time
    data = str(tmp_path / "data")
    e = fresh("--data-dir", data)
    configure(e, {"phoneAuth": {"delivery": {"+1555765": {"delaySeconds": 45}}}})
    session = e.send(REAL)
    assert e.stop() == 0
    e = fresh("--data-dir", data)
    assert inbox(e, REAL) == [] and events(e, "code.sent") == []
    answer = {}

    def wait():
        answer["r"] = requests.get(e.url + P + "/verificationCodes:wait", params={"phoneNumber": REAL, "timeoutSeconds": "30"}, timeout=60)

    t = threading.Thread(target=wait)
    t.start()
    # Whichever comes first, the long-poll or the clock's move, it is answered with the late code; the code.sent
    # event below is published only by the re-armed delivery (the inbox alone would show the code without it).
    time.sleep(0.2)
    assert e.session.post(e.url + "/emulator/v1/clock:advance", json={"seconds": 45}).status_code == 200
    t.join(60)
    assert answer["r"].status_code == 200 and answer["r"].json()["sessionInfo"] == session
    assert [x["sessionInfo"] for x in events(e, "code.sent")] == [session]


def test_rest_localized_text(fresh):
    e = fresh()
    r = e.itk("sendVerificationCode", {"phoneNumber": REAL, "autoRetrievalInfo": {"appSignatureHash": "FA+9qCX9VSu"}},
              headers={"X-Firebase-Locale": "es-419"})
    assert r.status_code == 200
    msg = inbox(e, REAL)[-1]["message"]
    assert msg.startswith("<#> ") and msg.endswith(" es tu código de verificación.\nFA+9qCX9VSu"), msg


def run_sdk(e, phone, mode, **env):
    script = os.path.join(HERE, "js", "sms_defense.cjs")
    r = subprocess.run(["node", script, phone], env={**os.environ, "EMULATOR_URL": e.url, "MODE": mode, **env},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@needs_sdk
def test_js_sdk_phone_flow_under_each_enforcement_state(fresh):
    e = fresh()
    # OFF: the SDK takes its v2 path: NO_RECAPTCHA plus the verifier's v2 token.
    out = run_sdk(e, FICTIONAL, "mock", CODE="123456")
    assert out["ok"], out
    assert out["configQueries"] and "clientType=CLIENT_TYPE_WEB" in out["configQueries"][0] and "version=RECAPTCHA_ENTERPRISE" in out["configQueries"][0]
    body = out["sends"][0]["body"]
    assert body["captchaResponse"] == "NO_RECAPTCHA" and body["recaptchaToken"] == "fake-recaptcha-token"
    assert body["clientType"] == "CLIENT_TYPE_WEB" and body["recaptchaVersion"] == "RECAPTCHA_ENTERPRISE"

    # AUDIT: emulator mode sends the mock Enterprise token "token"; a fictional number is exempt, a real one is
    # assessed (WOULD_BLOCK, the token is not one we minted) and still sent.
    configure(e, {"recaptchaConfig": {"phoneEnforcementState": "AUDIT"}})
    out = run_sdk(e, FICTIONAL, "mock", CODE="123456")
    assert out["ok"], out
    assert out["sends"][0]["body"]["captchaResponse"] == "token"
    out = run_sdk(e, REAL, "mock")
    assert out["ok"], out
    audit = events(e, "recaptcha.assessed")[-1]
    assert (audit["enforcementState"], audit["verdict"], audit["reason"], audit["phoneNumber"]) == ("AUDIT", "WOULD_BLOCK", "INVALID_RECAPTCHA_TOKEN", REAL)

    # ENFORCE: the mock token is refused for a real number with production's code; a fictional number still passes.
    configure(e, {"recaptchaConfig": {"phoneEnforcementState": "ENFORCE", "useSmsBotScore": True,
                                      "managedRules": [{"endScore": 0.3, "action": "BLOCK"}]}})
    out = run_sdk(e, REAL, "mock")
    assert out["error"] == "auth/invalid-recaptcha-token", out
    assert run_sdk(e, FICTIONAL, "mock", CODE="123456")["ok"]
    # ENFORCE with (a stand-in for) the reCAPTCHA Enterprise script: the SDK executes action sendVerificationCode with
    # the site key we serve; a minted token with a good score signs in, a bot score is blocked.
    out = run_sdk(e, REAL, "enterprise", SCORE="0.9")
    assert out["ok"], out
    # (The SDK warms up with action "verify" when it loads the config, then executes the send's own action.)
    assert out["actions"][-1] == "sendVerificationCode", out["actions"]
    assert set(out["siteKeys"]) == {"phone-auth-emulator"}, "the SDK executes with the key id of the recaptchaKey we serve"
    assert events(e, "recaptcha.assessed")[-1]["verdict"] == "ALLOWED"
    out = run_sdk(e, REAL, "enterprise", SCORE="0.1")
    assert out["error"] == "auth/invalid-app-credential", out
    assert events(e, "recaptcha.assessed")[-1]["reason"] == "BOT_SCORE"


@needs_sdk
def test_js_sdk_language_and_carrier_failures(fresh):
    e = fresh()
    out = run_sdk(e, REAL, "mock", LOCALE="fr")
    assert out["ok"], out
    assert out["sends"][0]["locale"] == "fr"
    assert out["message"].endswith(" est votre code de validation."), out["message"]
    configure(e, {"phoneAuth": {"delivery": {"+1555765": {"outcome": "REJECTED"}}}})
    out = run_sdk(e, REAL, "mock")
    assert out["error"] == "auth/error-code:-39", out
    configure(e, {"phoneAuth": {"delivery": {"+1555765": {"outcome": "LOST"}}}})
    out = run_sdk(e, REAL, "mock")
    assert out["error"] == "test/no-code-in-inbox", out


@needs_sdk
@pytest.mark.parametrize("state,phone,code", [("ENFORCE", FICTIONAL, "123456"), ("AUDIT", "+15557659002", None)], ids=["enforce-fictional", "audit-inbox"])
def test_js_sdk_mfa_sends_under_sms_defense(fresh, state, phone, code):
    """The JS SDK's whole SMS second-factor flow (mfa_flow.cjs) with SMS defense on: its mfaEnrollment:start and
    mfaSignIn:start carry the Enterprise fields; fictional numbers stay exempt under ENFORCE, and AUDIT records the
    MFA actions without blocking them."""
    e = fresh()
    configure(e, {"recaptchaConfig": {"phoneEnforcementState": state}})
    script = os.path.join(HERE, "js", "mfa_flow.cjs")
    r = subprocess.run(["node", script, phone, *([code] if code else [])], env={**os.environ, "EMULATOR_URL": e.url},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    actions = {v["action"] for v in events(e, "recaptcha.assessed")}
    if state == "AUDIT":
        assert {"mfaSmsEnrollment", "mfaSmsSignIn"} <= actions, actions
    else:
        assert actions == set()
