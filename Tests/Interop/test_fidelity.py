"""Issue 4: production behaviour switched on per project, against the running binary over raw HTTP."""
import threading
import time

import requests

from conftest import FICTIONAL, error_message

EMU = "/emulator/v1/projects/demo-phone"


def patch_config(emu, body):
    r = requests.patch(emu.url + EMU + "/config", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_enforce_web_ios_android_flows(fresh):
    emu = fresh()
    patch_config(emu, {"phoneAuth": {"appVerification": "ENFORCE"}})
    r = requests.get(emu.url + "/identitytoolkit.googleapis.com/v2/recaptchaConfig", params={"key": "k"})
    assert {e["provider"]: e["enforcementState"] for e in r.json()["recaptchaEnforcementState"]}["PHONE_PROVIDER"] == "ENFORCE"

    # Fictional numbers need nothing (the SDKs' testing switch relies on this), mock credentials included.
    assert emu.sign_in()["phoneNumber"] == FICTIONAL
    assert emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL, "captchaResponse": "token", "recaptchaVersion": "RECAPTCHA_ENTERPRISE"}).status_code == 200

    phone = "+15551230100"
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": phone})) == "MISSING_APP_CREDENTIAL"
    r = emu.itk("sendVerificationCode", {"phoneNumber": phone, "recaptchaToken": "not-minted"})
    assert error_message(r).startswith("CAPTCHA_CHECK_FAILED")

    # Web: a minted reCAPTCHA token.
    token = requests.post(emu.url + EMU + "/appCredentials", json={"type": "RECAPTCHA"}).json()["token"]
    r = emu.itk("sendVerificationCode", {"phoneNumber": phone, "clientType": "CLIENT_TYPE_WEB", "captchaResponse": "NO_RECAPTCHA",
                                         "recaptchaVersion": "RECAPTCHA_ENTERPRISE", "recaptchaToken": token})
    assert r.status_code == 200, r.text
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": r.json()["sessionInfo"], "code": emu.code_for(phone)})
    assert r.status_code == 200

    # iOS: verifyClient → the silent push's secret → send with receipt + secret (legacy v3 paths, as the iOS SDK).
    v3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
    r = emu.post(v3 + "verifyClient", {"appToken": "f0e1d2c3b4a59687", "isSandbox": True})
    assert r.status_code == 200, r.text
    receipt = r.json()["receipt"]
    assert r.json()["suggestedTimeout"]
    pushes = requests.get(emu.url + EMU + "/pushNotifications").json()["pushNotifications"]
    push = [p for p in pushes if p["receipt"] == receipt][0]
    assert push["appToken"] == "f0e1d2c3b4a59687"
    r = emu.post(v3 + "sendVerificationCode", {"phoneNumber": phone, "iosReceipt": receipt, "iosSecret": "wrong"})
    assert error_message(r) == "INVALID_APP_CREDENTIAL"
    r = emu.post(v3 + "sendVerificationCode", {"phoneNumber": phone, "iosReceipt": receipt, "iosSecret": push["secret"], "clientType": "CLIENT_TYPE_IOS"})
    assert r.status_code == 200, r.text
    assert emu.itk("verifyClient", {}).json()["error"]["message"] == "MISSING_IOS_APP_TOKEN"

    # Android: Play Integrity.
    token = requests.post(emu.url + EMU + "/appCredentials", json={"type": "PLAY_INTEGRITY"}).json()["token"]
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": phone, "playIntegrityToken": "forged"})) == "INVALID_APP_CREDENTIAL"
    r = emu.itk("sendVerificationCode", {"phoneNumber": phone, "clientType": "CLIENT_TYPE_ANDROID", "playIntegrityToken": token,
                                         "autoRetrievalInfo": {"appSignatureHash": "FA+9qCX9VSu"}})
    assert r.status_code == 200, r.text
    entry = requests.get(emu.url + EMU + "/verificationCodes", params={"phoneNumber": phone}).json()["verificationCodes"][-1]
    assert entry["message"].endswith("FA+9qCX9VSu") and entry["code"] in entry["message"]
    assert requests.post(emu.url + EMU + "/appCredentials", json={"type": "SMS"}).status_code == 400


def test_clock_expires_sessions_and_tokens(fresh):
    emu = fresh()
    body = emu.sign_in()
    session = emu.send(FICTIONAL)
    before = requests.get(emu.url + "/emulator/v1/clock").json()
    r = requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 3600})
    assert r.status_code == 200 and r.json()["offsetSeconds"] == 3600
    assert r.json()["nowMillis"] - before["nowMillis"] >= 3600 * 1000
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "123456"})) == "SESSION_EXPIRED"
    assert error_message(emu.itk("lookup", {"idToken": body["idToken"]})) == "TOKEN_EXPIRED"
    # The refresh token still works and the new token carries the advanced time.
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert r.status_code == 200
    assert emu.itk("lookup", {"idToken": r.json()["access_token"]}).status_code == 200
    assert requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": -5}).status_code == 400
    assert requests.post(emu.url + "/emulator/v1/clock:reset", json={}).json()["offsetSeconds"] == 0


def test_limits_quota_regions_scenarios(fresh):
    emu = fresh()
    patch_config(emu, {"phoneAuth": {"sendRateLimits": {"perPhoneNumber": {"max": 2, "perSeconds": 60}},
                                     "scenarioNumbers": {"+15005550006": {"onSend": "QUOTA_EXCEEDED"},
                                                         "+15005550007": {"onSignIn": "SESSION_EXPIRED"}}},
                       "smsRegionConfig": {"allowByDefault": {"disallowedRegions": ["CA"]}}})
    emu.send("+15552220001")
    emu.send("+15552220001")
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": "+15552220001"})) == "TOO_MANY_ATTEMPTS_TRY_LATER"
    for _ in range(5):
        emu.send(FICTIONAL)  # fictional numbers are never throttled
    requests.post(emu.url + "/emulator/v1/clock:advance", json={"seconds": 61})
    emu.send("+15552220001")
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": "+14165550000"})) == \
        "OPERATION_NOT_ALLOWED : SMS unable to be sent until this region enabled by the app developer"
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": "+15005550006"})) == "QUOTA_EXCEEDED"
    s = emu.send("+15005550007")
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for("+15005550007")})) == "SESSION_EXPIRED"

    patch_config(emu, {"phoneAuth": {"smsQuota": {"max": 1, "perSeconds": 3600}}})
    emu.send("+15552220002")
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": "+15552220003"})) == "QUOTA_EXCEEDED : Exceeded quota."
    patch_config(emu, {"phoneAuth": {"sendRateLimits": {"perIp": {"max": 1, "perSeconds": 3600}}, "smsQuota": {"max": 0}}})
    emu.send("+15552220004")
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": "+15552220005"})) == "TOO_MANY_ATTEMPTS_TRY_LATER"


def test_long_poll_answered_by_a_send_from_another_connection(fresh):
    emu = fresh()
    phone = "+15553334444"
    result = {}

    def waiter():
        r = requests.get(emu.url + EMU + "/verificationCodes:wait", params={"phoneNumber": phone, "timeoutSeconds": 10})
        result["status"], result["body"] = r.status_code, r.json()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert requests.get(emu.url + "/").status_code == 200, "the event loop is not held by the waiter"
    session = emu.send(phone)
    t.join(5)
    assert result["status"] == 200 and result["body"]["sessionInfo"] == session and len(result["body"]["code"]) == 6
    start = time.time()
    r = requests.get(emu.url + EMU + "/verificationCodes:wait", params={"phoneNumber": "+15553334445", "timeoutSeconds": 0.5})
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"
    assert time.time() - start < 3


def test_key_rotation_keeps_old_tokens_valid(fresh):
    emu = fresh()
    import jwt
    old = emu.sign_in()["idToken"]
    old_kid = jwt.get_unverified_header(old)["kid"]
    r = requests.post(emu.url + "/emulator/v1/keys:rotate", json={})
    assert r.status_code == 200
    new_kid = r.json()["kid"]
    assert new_kid != old_kid and r.json()["publishedKids"][:2] == [new_kid, old_kid]
    new = emu.sign_in()["idToken"]
    assert jwt.get_unverified_header(new)["kid"] == new_kid
    client = jwt.PyJWKClient(emu.url + "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")
    for token in (old, new):
        key = client.get_signing_key_from_jwt(token)
        assert jwt.decode(token, key.key, algorithms=["RS256"], audience="demo-phone")["aud"] == "demo-phone"
        assert emu.itk("lookup", {"idToken": token}).status_code == 200
