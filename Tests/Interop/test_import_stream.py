"""Issue 29 item 1: a large export (20,000 users, as `firebase emulators:export` and production load tests make
them, plus password users whose hashes firebase-admin's `import_users` sent in Firebase's modified SCRYPT and in
BCRYPT) streams in with `--import` and `--data-dir`, its users sign in (phone and password), it exports again the
same; a truncated or corrupt file fails the start naming the record, and the data directory keeps the users it had."""
import json
import os
import shutil
import subprocess
import sys
import uuid

import bcrypt
import firebase_admin
import requests
from firebase_admin import auth

from conftest import BINARY, Emulator, error_message
from test_password_hashes import MEMORY_COST, ROUNDS, SALT_SEPARATOR, SIGNER_KEY, firebase_scrypt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
import make_export  # noqa: E402

USERS = 20_000
OWNER = {"Authorization": "Bearer owner"}
ITK = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"


def user_count(emu):
    r = emu.session.post(emu.url + ITK + "/accounts:query", json={"returnUserInfo": False, "limit": 10_000_000}, headers=OWNER)
    assert r.status_code == 200, r.text
    return int(r.json()["recordsCount"])


def sign_in_phone(emu, phone):
    s = emu.send(phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": emu.code_for(phone)})
    assert r.status_code == 200, r.text
    return r.json()


def sign_in_password(emu, email, password):
    return emu.itk("signInWithPassword", {"email": email, "password": password, "returnSecureToken": True})


def accounts(directory):
    with open(os.path.join(directory, "auth_export", "accounts.json")) as f:
        return {u["localId"]: u for u in json.load(f)["users"]}


def start_fails(*args):
    return subprocess.run([BINARY, "--port", "0", *args], capture_output=True, text=True, timeout=120)


def test_a_large_export_round_trips_through_the_data_directory_and_bad_files_change_nothing(tmp_path, monkeypatch):
    generated = str(tmp_path / "generated")
    make_export.write_export(generated, USERS)

    # Emulator A: the generated users, plus password users imported by firebase-admin with production's hashes.
    a = Emulator(["--import", generated, "--export-root", str(tmp_path)])
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", a.host_port)
    app = firebase_admin.initialize_app(options={"projectId": "demo-phone"}, name=f"stream-{uuid.uuid4()}")
    try:
        assert user_count(a) == USERS
        salt = b"stream-salt"
        scrypt_alg = auth.UserImportHash.scrypt(key=SIGNER_KEY, rounds=ROUNDS, memory_cost=MEMORY_COST, salt_separator=SALT_SEPARATOR)
        r = auth.import_users([auth.ImportUserRecord(uid=f"scrypt-{i}", email=f"scrypt-{i}@example.com",
                                                     password_hash=firebase_scrypt(f"pw-{i}".encode(), salt), password_salt=salt)
                               for i in range(2)], hash_alg=scrypt_alg, app=app)
        assert r.success_count == 2, [e.reason for e in r.errors]
        r = auth.import_users([auth.ImportUserRecord(uid=f"bcrypt-{i}", email=f"bcrypt-{i}@example.com",
                                                     password_hash=bcrypt.hashpw(f"pw-{i}".encode(), bcrypt.gensalt(rounds=4)))
                               for i in range(2)], hash_alg=auth.UserImportHash.bcrypt(), app=app)
        assert r.success_count == 2, [e.reason for e in r.errors]
        first = str(tmp_path / "first")
        r = a.session.post(a.url + "/emulator/v1/projects/demo-phone:export", json={"path": first})
        assert r.status_code == 200 and r.json()["users"] == USERS + 4, r.text
    finally:
        firebase_admin.delete_app(app)
        assert a.stop() == 0
    exported = accounts(first)
    assert len(exported) == USERS + 4
    assert exported["scrypt-0"]["passwordHashAlgorithm"]["hashAlgorithm"] == "SCRYPT"

    # Emulator B: that export into a data directory; its users sign in; it exports the same users.
    data = str(tmp_path / "data")
    second = str(tmp_path / "second")
    b = Emulator(["--import", first, "--data-dir", data, "--export-on-exit", second])
    try:
        assert user_count(b) == USERS + 4
        for i in (0, 7_777, USERS - 1):
            assert sign_in_phone(b, f"+1555{i:07d}")["localId"] == f"u{i:010d}LoadTestUserXyz"
        for name in ("scrypt", "bcrypt"):
            assert error_message(sign_in_password(b, f"{name}-1@example.com", "pw-0")) == "INVALID_LOGIN_CREDENTIALS"
            r = sign_in_password(b, f"{name}-1@example.com", "pw-1")
            assert r.status_code == 200, r.text
            assert r.json()["localId"] == f"{name}-1"
    finally:
        assert b.stop() == 0
    again = accounts(second)
    assert set(again) == set(exported)
    signed_in = {f"u{i:010d}LoadTestUserXyz" for i in (0, 7_777, USERS - 1)} | {"scrypt-1", "bcrypt-1"}
    assert all(again[k] == v for k, v in exported.items() if k not in signed_in)
    for k in signed_in:  # a sign-in moves lastLoginAt and replaces an imported hash with ours
        assert {f: again[k].get(f) for f in ("phoneNumber", "email", "displayName", "customAttributes", "createdAt")} == \
               {f: exported[k].get(f) for f in ("phoneNumber", "email", "displayName", "customAttributes", "createdAt")}

    # A truncated or corrupt file: the start fails naming the record, and the data directory keeps what it had.
    with open(os.path.join(first, "auth_export", "accounts.json"), "rb") as f:
        good = f.read()
    bad = str(tmp_path / "bad")
    shutil.copytree(first, bad)
    bad_file = os.path.join(bad, "auth_export", "accounts.json")
    target = "u0000012345LoadTestUserXyz"
    index = list(exported).index(target)  # the export's order (by uid)
    record_start = good.index(b'"localId": "' + target.encode())
    cases = [
        (good[:10], "the file ends inside the top-level object"),
        (good[:len(good) // 3], "the file ends inside"),
        (good[:-4], "the file ends inside"),
        (good[:record_start] + b"!" + good[record_start + 1:], f"record {index} (byte {record_start}, line "),
        (good + b"garbage", "unexpected data after the JSON object"),
        (good.replace(b'"+15550012345"', b'"not a phone"', 1), f"record {index} (byte "),
    ]
    for content, message in cases:
        with open(bad_file, "wb") as f:
            f.write(content)
        r = start_fails("--import", bad, "--data-dir", data)
        assert r.returncode == 2, r.stderr
        assert "accounts.json: " in r.stderr and message in r.stderr and "the data directory is unchanged" in r.stderr, r.stderr
    # A user of the data directory that a new import's user collides with (same phone, other uid): refused whole.
    with open(bad_file, "wb") as f:
        f.write(json.dumps({"users": [{"localId": "newcomer", "phoneNumber": "+15550000001"}]}).encode())
    r = start_fails("--import", bad, "--data-dir", data)
    assert r.returncode == 2 and "phone number belongs to user u0000000001LoadTestUserXyz" in r.stderr, r.stderr
    c = Emulator(["--data-dir", data])
    try:
        assert user_count(c) == USERS + 4
        assert requests.post(c.url + ITK + "/accounts:lookup", json={"localId": ["newcomer"]}, headers=OWNER).json().get("users") is None
    finally:
        assert c.stop() == 0


def test_production_auth_export_json_and_csv(tmp_path):
    # `firebase auth:export users.json` / `--format=csv` (firebase-tools' accountExporter layout).
    prod = tmp_path / "users.json"
    prod.write_text(json.dumps({"users": [
        {"localId": "p1", "email": "p1@example.com", "emailVerified": True, "displayName": "P One", "createdAt": "1700000000000",
         "lastSignedInAt": "1700000001000", "phoneNumber": "+15557770001", "disabled": False, "customAttributes": '{"a":1}',
         "providerUserInfo": [{"providerId": "google.com", "rawId": "g-1", "email": "p1@example.com", "displayName": "P One"}]},
    ]}, indent=2))
    e = Emulator(["--import", str(prod)])
    try:
        u = e.session.post(e.url + ITK + "/accounts:lookup", json={"localId": ["p1"]}, headers=OWNER).json()["users"][0]
        assert (u["email"], u["phoneNumber"], u["lastLoginAt"], u["customAttributes"]) == ("p1@example.com", "+15557770001", "1700000001000", '{"a":1}')
        assert any(p["providerId"] == "google.com" and p["rawId"] == "g-1" for p in u["providerUserInfo"])
    finally:
        assert e.stop() == 0
    csv = tmp_path / "users.csv"
    row = ["c1", "c1@example.com", "true", "", "", '"Doe, Jane"', ""] + ["g-2", "c1@example.com", "", ""] + [""] * 12 + \
          ["1700000000000", "1700000002000", "+15557770002", "false", '"{""tier"":""gold""}"']
    csv.write_text(",".join(row) + ",\n")
    e = Emulator(["--import", str(csv)])
    try:
        u = e.session.post(e.url + ITK + "/accounts:lookup", json={"localId": ["c1"]}, headers=OWNER).json()["users"][0]
        assert (u["displayName"], u["phoneNumber"], u["customAttributes"], u["emailVerified"]) == ("Doe, Jane", "+15557770002", '{"tier":"gold"}', True)
    finally:
        assert e.stop() == 0
    csv.write_text(",".join(row) + ",\n" + "c2,short\n")
    r = start_fails("--import", str(csv))
    assert r.returncode == 2 and "users.csv: record 1 (byte " in r.stderr and "line 2): 2 columns" in r.stderr, r.stderr
