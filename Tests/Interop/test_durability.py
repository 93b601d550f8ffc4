"""Issue 5: --data-dir survives kill -9; firebase-tools export/import in both directions."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import requests

from conftest import BINARY, FICTIONAL, ROOT, Emulator, error_message

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "official_export")
OWNER = {"Authorization": "Bearer owner"}


def admin_lookup(emu, uids, project="demo-phone", tenant=None):
    path = f"/identitytoolkit.googleapis.com/v1/projects/{project}" + (f"/tenants/{tenant}" if tenant else "") + "/accounts:lookup"
    return {u["localId"]: u for u in requests.post(emu.url + path, json={"localId": uids}, headers=OWNER).json().get("users", [])}


def test_kill_9_during_a_stream_of_sign_ins_loses_nothing_acknowledged(tmp_path):
    data = str(tmp_path / "data")
    emu = Emulator(["--data-dir", data, "--test-phone", "+15550000000=000000"])
    acknowledged = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(n):
        s = requests.Session()
        i = 0
        while not stop.is_set():
            phone = f"+1555{n:02d}{i:05d}"
            i += 1
            try:
                r = s.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", params={"key": "k"}, json={"phoneNumber": phone}, timeout=5)
                session = r.json()["sessionInfo"]
                code = s.get(emu.url + "/emulator/v1/projects/demo-phone/verificationCodes", params={"phoneNumber": phone}, timeout=5).json()["verificationCodes"][-1]["code"]
                r = s.post(emu.url + "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber", params={"key": "k"},
                           json={"sessionInfo": session, "code": code}, timeout=5)
            except (requests.RequestException, ValueError, KeyError, IndexError):
                return  # the server died under us: whatever was not acknowledged does not count
            if r.status_code == 200:
                with lock:
                    acknowledged.append((phone, r.json()))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while time.time() < deadline:
        with lock:
            if len(acknowledged) >= 60:
                break
        time.sleep(0.01)
    emu.proc.send_signal(signal.SIGKILL)
    emu.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    assert len(acknowledged) >= 60

    again = Emulator(["--data-dir", data])
    try:
        found = admin_lookup(again, [b["localId"] for _, b in acknowledged])
        assert len(found) == len(acknowledged), "every acknowledged sign-in survives"
        for phone, body in acknowledged:
            assert found[body["localId"]]["phoneNumber"] == phone
        # Old ID tokens still verify (same keys) and refresh tokens still work.
        for _, body in acknowledged[:10]:
            assert again.itk("lookup", {"idToken": body["idToken"]}).status_code == 200
            r = again.post("/securetoken.googleapis.com/v1/token", {"grant_type": "refresh_token", "refresh_token": body["refreshToken"]})
            assert r.status_code == 200, r.text
        # The same phone signs in as the same uid after the restart.
        phone, body = acknowledged[0]
        s = again.send(phone)
        r = again.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": again.code_for(phone)})
        assert r.json()["localId"] == body["localId"] and r.json()["isNewUser"] is False
    finally:
        assert again.stop() == 0


def test_claims_config_sessions_and_keys_survive_a_restart(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    body = a.sign_in()
    requests.post(f"{a.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                  json={"localId": body["localId"], "customAttributes": '{"role":"admin"}'}, headers=OWNER)
    requests.patch(a.url + "/emulator/v1/projects/demo-phone/config",
                   json={"signIn": {"phoneNumber": {"testPhoneNumbers": {FICTIONAL: "123456", "+15557770000": "777000"}}}})
    pending = a.send("+15557771234")
    code = a.code_for("+15557771234")
    rotated = requests.post(a.url + "/emulator/v1/keys:rotate", json={}).json()["kid"]
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()

    b = Emulator(["--data-dir", data])
    try:
        assert admin_lookup(b, [body["localId"]])[body["localId"]]["customAttributes"] == '{"role":"admin"}'
        assert b.sign_in("+15557770000", "777000")["phoneNumber"] == "+15557770000"
        r = b.itk("signInWithPhoneNumber", {"sessionInfo": pending, "code": code})
        assert r.status_code == 200, "a pending session survives"
        kids = list(requests.get(b.url + "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com").json())
        assert rotated in kids
        assert b.itk("lookup", {"idToken": body["idToken"]}).status_code == 200
    finally:
        b.stop()


def test_two_servers_on_one_directory_are_refused(tmp_path):
    data = str(tmp_path / "data")
    a = Emulator(["--data-dir", data])
    try:
        r = subprocess.run([BINARY, "--port", "0", "--data-dir", data], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and "in use" in r.stderr
    finally:
        a.stop()
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run([BINARY, "--port", "0", "--data-dir", str(f)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_import_of_an_official_export(tmp_path):
    emu = Emulator(["--import", FIXTURE])
    try:
        users = admin_lookup(emu, ["Fq3nWb9sQe2kL0xPz7RtYv1uJm4a", "disabledPhoneUser0000000000a", "anonUser000000000000000000b"])
        assert len(users) == 3
        u = users["Fq3nWb9sQe2kL0xPz7RtYv1uJm4a"]
        assert u["phoneNumber"] == "+15555550100" and u["customAttributes"] == '{"role":"tester"}'
        assert u["createdAt"] == "1732950000456" and u["lastLoginAt"] == "1732960000123"
        assert users["disabledPhoneUser0000000000a"]["disabled"] is True
        assert admin_lookup(emu, ["tenantUser000000000000000000"], tenant="team-a-x1y2z")["tenantUser000000000000000000"]["phoneNumber"] == "+15555550102"
        s = emu.send("+15555550100")
        r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for("+15555550100")})
        assert r.json()["localId"] == "Fq3nWb9sQe2kL0xPz7RtYv1uJm4a"
        s = emu.send("+15555550101")
        assert error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for("+15555550101")})) == "USER_DISABLED"
    finally:
        assert emu.stop() == 0


def test_export_on_exit_round_trips_and_matches_the_official_layout(tmp_path):
    out = str(tmp_path / "export")
    a = Emulator(["--export-on-exit", out])
    body = a.sign_in()
    requests.post(f"{a.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                  json={"localId": "admin-made", "phoneNumber": "+15556660000", "disabled": True}, headers=OWNER)
    requests.post(f"{a.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                  json={"localId": body["localId"], "customAttributes": '{"tier":"gold"}'}, headers=OWNER)
    requests.post(f"{a.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/team-b/accounts",
                  json={"localId": "in-tenant", "phoneNumber": "+15556660001"}, headers=OWNER)
    requests.patch(a.url + "/emulator/v1/projects/demo-phone/config", json={"phoneAuth": {"maxCodeAttempts": 3}})
    assert a.stop() == 0

    meta = json.load(open(os.path.join(out, "firebase-export-metadata.json")))
    assert meta["auth"]["path"] == "auth_export"
    accounts = json.load(open(os.path.join(out, "auth_export", "accounts.json")))
    assert accounts["kind"] == "identitytoolkit#DownloadAccountResponse"
    by_id = {u["localId"]: u for u in accounts["users"]}
    assert set(by_id) == {body["localId"], "admin-made"}
    assert by_id[body["localId"]]["providerUserInfo"] == [{"providerId": "phone", "rawId": FICTIONAL, "phoneNumber": FICTIONAL}]
    assert isinstance(by_id[body["localId"]]["createdAt"], str)
    assert json.load(open(os.path.join(out, "auth_export", "accounts-team-b.json")))["users"][0]["localId"] == "in-tenant"
    config = json.load(open(os.path.join(out, "auth_export", "config.json")))
    assert config["signIn"]["allowDuplicateEmails"] is False and config["phoneAuth"]["maxCodeAttempts"] == 3
    assert not [f for f in os.listdir(os.path.join(out, "auth_export")) if ".tmp" in f]

    b = Emulator(["--import", out, "--export-root", str(tmp_path)])
    try:
        users = admin_lookup(b, [body["localId"], "admin-made"])
        assert users[body["localId"]]["customAttributes"] == '{"tier":"gold"}'
        assert users[body["localId"]]["createdAt"] == by_id[body["localId"]]["createdAt"]
        assert users["admin-made"]["disabled"] is True
        assert "in-tenant" in admin_lookup(b, ["in-tenant"], tenant="team-b")
        assert requests.get(b.url + "/emulator/v1/projects/demo-phone/config").json()["phoneAuth"]["maxCodeAttempts"] == 3
        again = b.sign_in()
        assert again["localId"] == body["localId"], "the same phone keeps its uid across export/import"
        # On-demand export (inside --export-root).
        out2 = str(tmp_path / "export2")
        r = requests.post(b.url + "/emulator/v1/projects/demo-phone:export", json={"path": out2})
        assert r.status_code == 200 and r.json()["users"] == 3
        assert os.path.exists(os.path.join(out2, "auth_export", "accounts.json"))
    finally:
        b.stop()


def test_bad_imports_are_clear_errors(tmp_path):
    def start(*args):
        return subprocess.run([BINARY, "--port", "0", *args], capture_output=True, text=True, timeout=10)

    r = start("--import", str(tmp_path / "missing"))
    assert r.returncode == 2 and "not an emulator export" in r.stderr
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURE, bad)
    (bad / "auth_export" / "accounts.json").write_text('{"users": [')
    r = start("--import", str(bad))
    assert r.returncode == 2 and 'accounts.json: record 0 (byte 11, line 1): the file ends inside the "users" array' in r.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "firebase-export-metadata.json").write_text('{"version": "1", "firestore": {}}')
    r = start("--import", str(foreign))
    assert r.returncode == 2 and "no \"auth\" entry" in r.stderr
