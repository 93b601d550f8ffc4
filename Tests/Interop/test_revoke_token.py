"""accounts:revokeToken (POST /v2/accounts:revokeToken) through the real JS SDK's revokeAccessToken (js/revoke_token.cjs),
and production's refusals as raw HTTP against the release binary."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import error_message

V2 = "/identitytoolkit.googleapis.com/v2/accounts:revokeToken"


def revoke(emu, body):
    return emu.post(V2, body)


def events(emu):
    r = emu.session.get(f"{emu.url}/emulator/v1/projects/demo-phone/events",
                        params={"format": "jsonl", "follow": "false", "since": "0", "type": "idpToken.revoked"})
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


@pytest.mark.skipif(not os.environ.get("FIREBASE_SDK_DIR") or not shutil.which("node"), reason="needs FIREBASE_SDK_DIR and node")
def test_js_sdk_revoke_access_token(emu):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "revoke_token.cjs")
    r = subprocess.run(["node", script, "js"], env={**os.environ, "EMULATOR_URL": emu.url}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["path"] == V2 and out["status"] == 200 and out["response"] == {}
    assert set(out["body"]) == {"providerId", "tokenType", "token", "idToken"}
    assert out["body"]["token"] == "apple-access-token-js"
    assert out["deletedUser"] == "auth/user-token-expired" and out["signedOutRequests"] == 0
    revoked = [e for e in events(emu) if e["uid"] == out["uid"]]
    assert [(e["providerId"], e["tokenType"]) for e in revoked] == [("apple.com", "ACCESS_TOKEN")]
    assert "token" not in revoked[0]


def test_refusals_and_a_code_with_its_redirect(emu):
    up = emu.itk("signUp", {"email": "revoke@example.com", "password": "secret12", "returnSecureToken": True}).json()
    t = up["idToken"]
    ok = {"providerId": "apple.com", "tokenType": "CODE", "token": "auth-code", "redirectUri": "https://app.example.com/cb", "idToken": t}
    r = revoke(emu, ok)
    assert r.status_code == 200 and r.json() == {}
    for change, expected in [({"providerId": None}, "MISSING_PROVIDER_ID"),
                             ({"providerId": "google.com"}, "INVALID_PROVIDER_ID : Only apple.com tokens can be revoked."),
                             ({"tokenType": None}, "tokenType is required: REFRESH_TOKEN, ACCESS_TOKEN or CODE."),
                             ({"token": None}, "token is required."),
                             ({"redirectUri": None}, "redirectUri is required when tokenType is CODE."),
                             ({"redirectUri": "https://localhost/cb"},
                              "redirectUri must be an https URI with a domain name, not an IP address or localhost."),
                             ({"idToken": None}, "MISSING_ID_TOKEN"), ({"idToken": "nope"}, "INVALID_ID_TOKEN")]:
        body = {k: v for k, v in {**ok, **change}.items() if v is not None}
        r = revoke(emu, body)
        assert r.status_code == 400 and error_message(r) == expected, (change, r.text)
    # Production's method is v2 only.
    assert emu.itk("revokeToken", ok).status_code == 404
    assert [e["tokenType"] for e in events(emu) if e["uid"] == up["localId"]] == ["CODE"]
