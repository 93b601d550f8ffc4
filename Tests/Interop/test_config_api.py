"""Fictional numbers from every source, and the v2 Admin / emulator config APIs."""
import requests

from conftest import FICTIONAL, error_message

ADMIN = {"Authorization": "Bearer owner"}


def test_v2_admin_config_round_trip_with_update_mask(fresh):
    emu = fresh()
    url = emu.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"
    r = requests.get(url)
    assert r.status_code == 401
    cfg = requests.get(url, headers=ADMIN).json()
    assert cfg["signIn"]["phoneNumber"]["testPhoneNumbers"] == {FICTIONAL: "123456"}

    body = {"signIn": {"phoneNumber": {"enabled": True, "testPhoneNumbers": {"+16505553434": "654321"}}},
            "mfa": {"state": "DISABLED"}}
    r = requests.patch(url, params={"updateMask": "signIn.phoneNumber.testPhoneNumbers"}, json=body, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["signIn"]["phoneNumber"]["testPhoneNumbers"] == {"+16505553434": "654321"}
    assert r.json()["mfa"]["state"] == "ENABLED", "fields outside the mask are not applied"
    assert requests.get(url, headers=ADMIN).json()["signIn"]["phoneNumber"]["testPhoneNumbers"] == {"+16505553434": "654321"}

    # The new number works at once; the replaced one is now an ordinary number.
    assert emu.sign_in("+16505553434", "654321")["phoneNumber"] == "+16505553434"
    session = emu.send(FICTIONAL)
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "123456"})) == "INVALID_CODE"

    # A PATCH that names `mfa` applies it (SMS multi-factor is modelled since issue 13), and a GET returns it.
    r = requests.patch(url, params={"updateMask": "mfa"}, json=body, headers=ADMIN)
    assert r.json()["mfa"] == {"state": "DISABLED", "enabledProviders": []}
    assert requests.get(url, headers=ADMIN).json()["mfa"]["state"] == "DISABLED"
    # Unmodelled fields survive a GET after a PATCH that names them.
    other = {"blockingFunctions": {"forwardInboundCredentials": {"idToken": True}}}
    r = requests.patch(url, params={"updateMask": "blockingFunctions"}, json=other, headers=ADMIN)
    assert r.json()["blockingFunctions"] == other["blockingFunctions"]
    assert requests.get(url, headers=ADMIN).json()["blockingFunctions"] == other["blockingFunctions"]
    r = requests.patch(url, params={"updateMask": "signIn.phoneNumber.testPhoneNumbers"},
                       json={"signIn": {"phoneNumber": {"testPhoneNumbers": {"not-a-number": "1"}}}}, headers=ADMIN)
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_emulator_config_patch_merges(fresh):
    emu = fresh()
    url = emu.url + "/emulator/v1/projects/demo-phone/config"
    cfg = requests.get(url).json()
    assert cfg["phoneAuth"]["codeLength"] == 6 and cfg["phoneAuth"]["appVerification"] == "OFF"
    r = requests.patch(url, json={"phoneAuth": {"codeLength": 8, "maxCodeAttempts": 2}})
    assert r.status_code == 200
    cfg = r.json()
    assert cfg["phoneAuth"]["codeLength"] == 8 and cfg["phoneAuth"]["maxCodeAttempts"] == 2
    assert cfg["phoneAuth"]["sessionTtlSeconds"] == 600
    assert cfg["signIn"]["phoneNumber"]["testPhoneNumbers"] == {FICTIONAL: "123456"}
    emu.send("+15551239999")
    assert len(emu.code_for("+15551239999")) == 8
    r = requests.patch(url, json={"phoneAuth": {"bogus": 1}})
    assert r.status_code == 400 and "phoneAuth.bogus" in r.json()["error"]["message"]
    r = requests.patch(url, json={"phoneAuth": {"codeLength": "six"}})
    assert r.status_code == 400


def test_other_projects_are_isolated(fresh):
    emu = fresh()
    r = requests.patch(emu.url + "/emulator/v1/projects/other-project/config",
                       json={"signIn": {"phoneNumber": {"testPhoneNumbers": {"+15550001111": "111111"}}}})
    assert r.status_code == 200
    assert requests.get(emu.url + "/emulator/v1/projects/demo-phone/config").json()["signIn"]["phoneNumber"]["testPhoneNumbers"] == {FICTIONAL: "123456"}


def test_test_phones_from_flag_and_env(fresh):
    emu = fresh("--test-phone", "+15555550100=111111", env={"PHONE_AUTH_EMULATOR_TEST_PHONES": "+15555550101=222222, +15555550102=333333"})
    assert emu.sign_in("+15555550100", "111111")["phoneNumber"] == "+15555550100"
    assert emu.sign_in("+15555550101", "222222")["phoneNumber"] == "+15555550101"
    assert emu.sign_in("+1 555 555 0102", "333333")["phoneNumber"] == "+15555550102"
    assert emu.sign_in(FICTIONAL, "123456")["phoneNumber"] == FICTIONAL


def test_verification_codes_delete(fresh):
    emu = fresh()
    s1 = emu.send("+15551110001")
    emu.send("+15551110002")
    url = emu.url + "/emulator/v1/projects/demo-phone/verificationCodes"
    assert len(requests.get(url).json()["verificationCodes"]) == 2
    assert requests.delete(url, params={"phoneNumber": "+15551110002"}).status_code == 200
    assert [c["phoneNumber"] for c in requests.get(url).json()["verificationCodes"]] == ["+15551110001"]
    assert requests.delete(url).status_code == 200
    assert requests.get(url).json()["verificationCodes"] == []
    assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": s1, "code": "000000"})) == "INVALID_SESSION_INFO"


def test_wipe_accounts(fresh):
    emu = fresh()
    body = emu.sign_in()
    assert requests.delete(emu.url + "/emulator/v1/projects/demo-phone/accounts").status_code == 200
    assert error_message(emu.itk("lookup", {"idToken": body["idToken"]})) == "USER_NOT_FOUND"
    again = emu.sign_in()
    assert again["isNewUser"] is True and again["localId"] != body["localId"]
