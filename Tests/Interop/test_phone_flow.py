"""The phone sign-in flow over raw HTTP against the running binary: the contract's wire behaviour and errors."""
import base64
import json

import requests

from conftest import FICTIONAL, FICTIONAL_CODE, error_message


def decode(token):
    parts = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)
    return json.loads(base64.urlsafe_b64decode(pad(parts[0]))), json.loads(base64.urlsafe_b64decode(pad(parts[1]))), parts[2]


def test_status_root(emu):
    r = requests.get(emu.url + "/")
    assert r.status_code == 200
    assert r.json()["authEmulator"]["ready"] is True


def test_fictional_number_signs_in_with_preset_code_and_full_claims(emu):
    body = emu.sign_in()
    assert body["phoneNumber"] == FICTIONAL
    assert body["expiresIn"] == "3600"
    assert isinstance(body["refreshToken"], str) and body["refreshToken"]
    assert "mfaPendingCredential" not in body
    header, claims, sig = decode(body["idToken"])
    assert header["alg"] == "RS256" and header["typ"] == "JWT" and header["kid"]
    assert sig
    assert claims["iss"] == "https://securetoken.google.com/demo-phone"
    assert claims["aud"] == "demo-phone"
    assert claims["sub"] == claims["user_id"] == body["localId"]
    assert claims["exp"] == claims["iat"] + 3600
    assert claims["phone_number"] == FICTIONAL
    assert claims["firebase"] == {"identities": {"phone": [FICTIONAL]}, "sign_in_provider": "phone"}
    assert claims["auth_time"] <= claims["iat"]


def test_formatted_number_is_the_same_user(emu):
    a = emu.sign_in(FICTIONAL)
    b = emu.sign_in("+1 (650) 555-4567")
    c = emu.sign_in("+1.650.555.4567")
    assert a["localId"] == b["localId"] == c["localId"]
    assert b["isNewUser"] is False and b["phoneNumber"] == FICTIONAL


def test_wrong_code_then_reused_session(emu):
    session = emu.send(FICTIONAL)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "000000"})
    assert r.status_code == 400 and error_message(r) == "INVALID_CODE"
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": FICTIONAL_CODE})
    assert r.status_code == 200, "a wrong code must not consume the session"
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": FICTIONAL_CODE})
    assert r.status_code == 400 and error_message(r) == "INVALID_SESSION_INFO"


def test_envelope_shape(emu):
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": "nope", "code": "1"})
    assert r.json() == {"error": {"code": 400, "message": "INVALID_SESSION_INFO",
                                  "errors": [{"message": "INVALID_SESSION_INFO", "domain": "global", "reason": "invalid"}],
                                  "status": "INVALID_ARGUMENT"}}


def test_missing_fields(emu):
    assert error_message(emu.itk("signInWithPhoneNumber", {"code": "1"})) == "MISSING_SESSION_INFO"
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": "x"})) == "MISSING_CODE"


def test_real_looking_number_code_lands_in_inbox(emu):
    phone = "+15551230001"
    session = emu.send(phone)
    entries = requests.get(emu.url + "/emulator/v1/projects/demo-phone/verificationCodes", params={"phoneNumber": "+1 555 123 0001"}).json()["verificationCodes"]
    assert [e["sessionInfo"] for e in entries] == [session]
    e = entries[0]
    assert len(e["code"]) == 6 and e["code"].isdigit()
    assert e["fictional"] is False and e["attemptsLeft"] == 5 and e["code"] in e["message"]
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": e["code"]})
    assert r.status_code == 200 and r.json()["isNewUser"] is True
    left = requests.get(emu.url + "/emulator/v1/projects/demo-phone/verificationCodes", params={"phoneNumber": phone}).json()
    assert left["verificationCodes"] == []


def test_attempts_run_out(emu):
    phone = "+15551230002"
    session = emu.send(phone)
    for _ in range(5):
        assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "x"})) == "INVALID_CODE"
    code = emu.code_for(phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": code})
    assert error_message(r) == "TOO_MANY_ATTEMPTS_TRY_LATER"
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": code})
    assert error_message(r) == "INVALID_SESSION_INFO"


def test_phone_number_errors(emu):
    cases = {
        "": "INVALID_PHONE_NUMBER : Invalid format.",
        "6505554567": "INVALID_PHONE_NUMBER : Invalid format.",
        "+1650abc": "INVALID_PHONE_NUMBER : Invalid format.",
        "+1650": "INVALID_PHONE_NUMBER : TOO_SHORT",
        "+1650555456712345": "INVALID_PHONE_NUMBER : TOO_LONG",
        "+2812345678": "INVALID_PHONE_NUMBER : Invalid format.",
    }
    for phone, message in cases.items():
        r = emu.itk("sendVerificationCode", {"phoneNumber": phone})
        assert r.status_code == 400 and error_message(r) == message, (phone, r.text)
    assert error_message(emu.itk("sendVerificationCode", {})) == "INVALID_PHONE_NUMBER : Invalid format."


def test_sdk_fields_are_accepted(emu):
    r = emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL, "clientType": "CLIENT_TYPE_WEB", "captchaResponse": "NO_RECAPTCHA",
                                         "recaptchaVersion": "RECAPTCHA_ENTERPRISE", "recaptchaToken": "fake-recaptcha-token"})
    assert r.status_code == 200 and r.json().keys() == {"sessionInfo"}


def test_lookup_and_refresh(emu):
    body = emu.sign_in()
    r = emu.itk("lookup", {"idToken": body["idToken"]})
    assert r.status_code == 200
    users = r.json()["users"]
    assert len(users) == 1
    u = users[0]
    assert u["localId"] == body["localId"] and u["phoneNumber"] == FICTIONAL
    assert u["providerUserInfo"] == [{"providerId": "phone", "rawId": FICTIONAL, "phoneNumber": FICTIONAL}]
    assert u["createdAt"].isdigit() and u["lastLoginAt"].isdigit()

    form = emu.session.post(emu.url + "/securetoken.googleapis.com/v1/token", params={"key": "k"},
                            data={"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
    assert form.status_code == 200, form.text
    t = form.json()
    assert t["access_token"] == t["id_token"]
    assert t["expires_in"] == "3600" and t["token_type"] == "Bearer" and t["user_id"] == body["localId"]
    _, claims, _ = decode(t["access_token"])
    _, first, _ = decode(body["idToken"])
    assert claims["auth_time"] == first["auth_time"] and claims["sub"] == body["localId"]

    js = emu.post("/securetoken.googleapis.com/v1/token", {"grantType": "refresh_token", "refreshToken": body["refreshToken"]})
    assert js.status_code == 200 and js.json()["access_token"]


def test_refresh_errors(emu):
    url = emu.url + "/securetoken.googleapis.com/v1/token"
    assert error_message(emu.session.post(url, params={"key": "k"}, data={"refresh_token": "x"})) == "MISSING_GRANT_TYPE"
    assert error_message(emu.session.post(url, params={"key": "k"}, data={"grant_type": "password", "refresh_token": "x"})) == "INVALID_GRANT_TYPE"
    assert error_message(emu.session.post(url, params={"key": "k"}, data={"grant_type": "refresh_token"})) == "MISSING_REFRESH_TOKEN"
    assert error_message(emu.session.post(url, params={"key": "k"}, data={"grant_type": "refresh_token", "refresh_token": "forged"})) == "INVALID_REFRESH_TOKEN"
    r = emu.session.post(url, data={"grant_type": "refresh_token", "refresh_token": "x"})
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"


def test_lookup_rejects_tampered_and_foreign_tokens(emu):
    body = emu.sign_in()
    h, p, s = body["idToken"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
    claims["sub"] = claims["user_id"] = "someone-else"
    forged = h + "." + base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=") + "." + s
    assert error_message(emu.itk("lookup", {"idToken": forged})) == "INVALID_ID_TOKEN"
    unsigned = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').decode().rstrip("=") + "." + p + "."
    assert error_message(emu.itk("lookup", {"idToken": unsigned})) == "INVALID_ID_TOKEN"
    assert error_message(emu.itk("lookup", {"idToken": "garbage"})) == "INVALID_ID_TOKEN"
    assert error_message(emu.itk("lookup", {})) == "MISSING_ID_TOKEN"


def test_link_conflict_and_reauth(emu):
    owner_phone, other_phone = "+15551230011", "+15551230012"
    s = emu.send(owner_phone)
    owner = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(owner_phone)}).json()
    s = emu.send(other_phone)
    other = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(other_phone)}).json()

    # Re-auth with the user's own number keeps the uid.
    s = emu.send(other_phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(other_phone), "idToken": other["idToken"], "operation": "REAUTH"})
    assert r.status_code == 200 and r.json()["localId"] == other["localId"] and r.json()["isNewUser"] is False

    # Linking a number owned by someone else: 200 with a temporary proof and no tokens.
    s = emu.send(owner_phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(owner_phone), "idToken": other["idToken"]})
    assert r.status_code == 200, r.text
    conflict = r.json()
    assert conflict["phoneNumber"] == owner_phone and conflict["temporaryProof"] and "idToken" not in conflict
    r = emu.itk("signInWithPhoneNumber", {"temporaryProof": conflict["temporaryProof"], "phoneNumber": owner_phone, "idToken": other["idToken"]})
    assert error_message(r) == "PHONE_NUMBER_EXISTS"
    # The proof alone signs in as the owner.
    r = emu.itk("signInWithPhoneNumber", {"temporaryProof": conflict["temporaryProof"], "phoneNumber": owner_phone})
    assert r.status_code == 200 and r.json()["localId"] == owner["localId"]
    r = emu.itk("signInWithPhoneNumber", {"temporaryProof": "bogus", "phoneNumber": owner_phone})
    assert error_message(r) == "INVALID_TEMPORARY_PROOF"

    # REAUTH for a number nobody has → USER_NOT_FOUND (production).
    phone = "+15551230013"
    s = emu.send(phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(phone), "operation": "REAUTH"})
    assert error_message(r) == "USER_NOT_FOUND"


def test_legacy_v3_ios_paths(emu):
    base = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
    r = emu.post(base + "sendVerificationCode", {"phoneNumber": FICTIONAL, "clientType": "CLIENT_TYPE_IOS"})
    assert r.status_code == 200, r.text
    session = r.json()["sessionInfo"]
    r = emu.post(base + "verifyPhoneNumber", {"sessionInfo": session, "code": FICTIONAL_CODE, "operation": "SIGN_UP_OR_IN"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["idToken"] and body["refreshToken"] and body["expiresIn"] == "3600"
    r = emu.post(base + "getAccountInfo", {"idToken": body["idToken"]})
    assert r.status_code == 200 and len(r.json()["users"]) == 1
    # iOS refreshes with a JSON body.
    r = emu.post("/securetoken.googleapis.com/v1/token", {"grantType": "refresh_token", "refreshToken": body["refreshToken"]})
    assert r.status_code == 200 and r.json()["access_token"]


def test_recaptcha_config_is_off(emu):
    r = requests.get(emu.url + "/identitytoolkit.googleapis.com/v2/recaptchaConfig",
                     params={"key": "fake-api-key", "clientType": "CLIENT_TYPE_WEB", "version": "RECAPTCHA_ENTERPRISE"})
    assert r.status_code == 200
    states = {e["provider"]: e["enforcementState"] for e in r.json()["recaptchaEnforcementState"]}
    assert states["PHONE_PROVIDER"] == "OFF"


def test_credentials(emu):
    url = emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode"
    r = requests.post(url, json={"phoneNumber": FICTIONAL})
    assert r.status_code == 403 and r.json()["error"]["message"] == "The request is missing a valid API key."
    assert requests.post(url, json={"phoneNumber": FICTIONAL}, headers={"x-goog-api-key": "abc"}).status_code == 200
    assert requests.post(url, json={"phoneNumber": FICTIONAL}, headers={"Authorization": "bEArEr OWNER"}).status_code == 200
    r = requests.post(url, json={"phoneNumber": FICTIONAL}, headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401 and r.json()["error"]["status"] == "UNAUTHENTICATED"
    r = requests.post(url, params={"key": "k"}, json={"phoneNumber": FICTIONAL, "targetProjectId": "other"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("INSUFFICIENT_PERMISSION")


def test_malformed_json_and_unknown_path(emu):
    r = emu.session.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", params={"key": "k"},
                         data=b'{"phoneNumber": ', headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["status"] == "INVALID_ARGUMENT" and err["message"].startswith("Invalid JSON payload received.")
    r = emu.session.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", params={"key": "k"},
                         data=b'[1,2]', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("Invalid JSON payload received.")
    r = emu.session.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", params={"key": "k"},
                         data=b'{"phoneNumber": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = emu.itk("sendVerificationCode", {"phoneNumber": {"nested": True}})
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    r = requests.get(emu.url + "/no/such/path")
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"


def test_cors(emu):
    r = requests.options(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode",
                         headers={"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
                                  "Access-Control-Request-Headers": "content-type,x-client-version",
                                  "Access-Control-Request-Private-Network": "true"})
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
    assert r.headers["Access-Control-Allow-Headers"] == "content-type,x-client-version"
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert r.headers["Access-Control-Allow-Private-Network"] == "true"
    r = emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL}, headers={"Origin": "http://localhost:5173"})
    assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
