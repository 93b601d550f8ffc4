"""Issue 29.2: production's password hashes against the release binary. firebase-admin's `import_users` with each
`UserImportHash` imports users whose hashes independent implementations made (Firebase's scrypt from its reference
algorithm on hashlib's scrypt and pyca's AES-CTR, PyPI's bcrypt, hashlib and hmac); they sign in with
`signInWithPassword` as the client SDKs call it, wrong passwords fail, the first sign-in replaces the hash by ours,
and parameters a sign-in could not afford are refused with their message."""
import base64
import hashlib
import hmac

import bcrypt
import pytest
import requests
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from firebase_admin import auth

from conftest import claims_of, error_message

# The sample project's hash parameters in github.com/firebase/scrypt's README.
SIGNER_KEY = base64.b64decode("jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==")
SALT_SEPARATOR = base64.b64decode("Bw==")
ROUNDS, MEMORY_COST = 8, 14
ADMIN = {"Authorization": "Bearer owner"}
PROJECT = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"


def firebase_scrypt(password, salt):
    """Firebase's modified scrypt (github.com/firebase/scrypt): the first 32 bytes of scrypt(password, salt ‖
    separator, N=2^memoryCost, r=rounds, p=1, 64 bytes) key AES-256-CTR (counter from zero) over the signer key."""
    derived = hashlib.scrypt(password, salt=salt + SALT_SEPARATOR, n=2 ** MEMORY_COST, r=ROUNDS, p=1, dklen=64, maxmem=64 << 20)
    enc = Cipher(algorithms.AES(derived[:32]), modes.CTR(b"\0" * 16)).encryptor()
    return enc.update(SIGNER_KEY) + enc.finalize()


def test_the_reference_scrypt_gives_firebases_published_hash():
    # The README's exported user, so the hashes below are Firebase's and not just our reading of it.
    assert base64.b64encode(firebase_scrypt(b"user1password", base64.b64decode("42xEC+ixf3L2lw=="))).decode() == (
        "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==")


SALT = b"per-user-salt-\x00\xff"
HMAC_KEY = b"hmac signer key"


def md5_hex(password, salt):
    return hashlib.md5(salt + password).hexdigest().encode()  # rounds 0: the hex text (firebase-admin-node's test)


CASES = {
    "scrypt": (auth.UserImportHash.scrypt(key=SIGNER_KEY, rounds=ROUNDS, memory_cost=MEMORY_COST, salt_separator=SALT_SEPARATOR),
               firebase_scrypt),
    "bcrypt": (auth.UserImportHash.bcrypt(), lambda pw, salt: bcrypt.hashpw(pw, bcrypt.gensalt(rounds=10))),
    "standard_scrypt": (auth.UserImportHash.standard_scrypt(memory_cost=16384, parallelization=1, block_size=8, derived_key_length=64),
                        lambda pw, salt: hashlib.scrypt(pw, salt=salt, n=16384, r=8, p=1, dklen=64)),
    "pbkdf2_sha256": (auth.UserImportHash.pbkdf2_sha256(rounds=10000),
                      lambda pw, salt: hashlib.pbkdf2_hmac("sha256", pw, salt, 10000, 64)),
    "hmac_sha256": (auth.UserImportHash.hmac_sha256(key=HMAC_KEY), lambda pw, salt: hmac.new(HMAC_KEY, pw + salt, "sha256").digest()),
    "sha256": (auth.UserImportHash.sha256(rounds=100), None),
    "md5": (auth.UserImportHash.md5(rounds=0), md5_hex),
}


def sha256_rounds(password, salt, rounds=100):
    x = hashlib.sha256(salt + password).digest()
    for _ in range(rounds - 1):
        x = hashlib.sha256(x).digest()
    return x


def sign_in(emu, email, password):
    return emu.itk("signInWithPassword", {"email": email, "password": password, "returnSecureToken": True})


@pytest.mark.parametrize("name", list(CASES))
def test_imported_users_sign_in_and_are_rehashed(admin, name):
    emu, app = admin
    hash_alg, make = CASES[name]
    make = make or sha256_rounds
    password = "correct horse ☃"
    users = [auth.ImportUserRecord(uid=f"{name}-{i}", email=f"{name}-{i}@example.com",
                                   password_hash=make(f"{password}{i}".encode(), SALT + bytes([i])), password_salt=SALT + bytes([i]))
             for i in range(2)]
    users.append(auth.ImportUserRecord(uid=f"{name}-phone", phone_number="+15553339999"))
    result = auth.import_users(users, hash_alg=hash_alg, app=app)
    assert (result.success_count, result.failure_count) == (3, 0), [e.reason for e in result.errors]
    imported = {u.uid: u for u in auth.list_users(app=app).iterate_all()}
    assert imported[f"{name}-0"].password_hash == base64.urlsafe_b64encode(users[0].password_hash).decode()

    assert error_message(sign_in(emu, f"{name}-0@example.com", password + "1")) == "INVALID_LOGIN_CREDENTIALS"
    assert error_message(sign_in(emu, f"{name}-0@example.com", password)) == "INVALID_LOGIN_CREDENTIALS"
    r = sign_in(emu, f"{name}-0@example.com", password + "0")
    assert r.status_code == 200, r.text
    c = claims_of(r.json()["idToken"])
    assert c["user_id"] == f"{name}-0" and c["firebase"]["sign_in_provider"] == "password"
    assert auth.verify_id_token(r.json()["idToken"], app=app)["uid"] == f"{name}-0"

    # Production rehashes on the first successful sign-in: ours now, and the password still works.
    after = {u.uid: u for u in auth.list_users(app=app).iterate_all()}
    assert after[f"{name}-0"].password_hash != imported[f"{name}-0"].password_hash
    assert "passwordHashAlgorithm" not in after[f"{name}-0"]._data
    assert after[f"{name}-1"]._data["passwordHashAlgorithm"]["hashAlgorithm"] == hash_alg.to_dict()["hashAlgorithm"]
    assert sign_in(emu, f"{name}-0@example.com", password + "0").status_code == 200
    assert error_message(sign_in(emu, f"{name}-0@example.com", password + "1")) == "INVALID_LOGIN_CREDENTIALS"
    assert sign_in(emu, f"{name}-1@example.com", password + "1").status_code == 200


def test_hostile_parameters_are_refused_with_their_message(admin):
    emu, app = admin
    # STANDARD_SCRYPT with N = 2^20 (128 MiB per sign-in): firebase-admin sends it; the user is refused, others import.
    huge = auth.UserImportHash.standard_scrypt(memory_cost=1 << 20, parallelization=1, block_size=8, derived_key_length=64)
    result = auth.import_users([auth.ImportUserRecord(uid="plain", phone_number="+15553330001"),
                                auth.ImportUserRecord(uid="huge", email="huge@example.com", password_hash=b"x" * 64, password_salt=b"s")],
                               hash_alg=huge, app=app)
    assert result.success_count == 1 and [(e.index, e.reason) for e in result.errors] == [(1, (
        "STANDARD_SCRYPT with cpuMemCost 1048576, blockSize 8 and parallelization 1 is above this emulator's limits, "
        "128·r·(N + p + 2) ≤ 40 MiB of memory and N·r·p ≤ 524288: one sign-in would cost more (SECURITY.md)"))]
    assert auth.get_user("plain", app=app).phone_number == "+15553330001"
    with pytest.raises(auth.UserNotFoundError):
        auth.get_user("huge", app=app)

    # A bcrypt cost of 20 (a million rounds of the key schedule per sign-in).
    costly = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).replace(b"$04$", b"$20$")
    result = auth.import_users([auth.ImportUserRecord(uid="b20", email="b20@example.com", password_hash=costly)],
                               hash_alg=auth.UserImportHash.bcrypt(), app=app)
    assert [e.reason for e in result.errors] == [
        "bcrypt cost 20 is above this emulator's limit of 12: one sign-in would take seconds (SECURITY.md)"]

    # Outside production's ranges (firebase-admin checks them too, so these go raw): the request fails, production's code.
    user = {"localId": "raw", "email": "raw@example.com", "passwordHash": "YWJj", "salt": "c2FsdA=="}
    for params, code in [({"hashAlgorithm": "SCRYPT", "signerKey": "a2V5", "rounds": 8, "memoryCost": 15}, "INVALID_HASH_MEMORY_COST"),
                         ({"hashAlgorithm": "SHA256", "rounds": 8193}, "INVALID_HASH_ROUNDS"),
                         ({"hashAlgorithm": "HMAC_SHA256"}, "EMPTY_HASH_KEY"),
                         ({"hashAlgorithm": "ARGON3"}, "INVALID_HASH_ALGORITHM")]:
        r = requests.post(emu.url + PROJECT + "/accounts:batchCreate", json={**params, "users": [user]}, headers=ADMIN)
        assert r.status_code == 400 and error_message(r) == code, (params, r.text)
    with pytest.raises(ValueError):
        auth.UserImportHash.scrypt(key=SIGNER_KEY, rounds=8, memory_cost=15)
    with pytest.raises(auth.UserNotFoundError):
        auth.get_user("raw", app=app)


def test_imported_hashes_survive_a_restart_and_an_export(fresh, tmp_path):
    """The algorithm goes to the journal (--data-dir) and into exports, so users not yet signed in keep working."""
    data, export = tmp_path / "data", tmp_path / "export"
    emu = fresh("--data-dir", str(data), "--export-on-exit", str(export))
    body = {**CASES["scrypt"][0].to_dict(),
            "users": [{"localId": "s1", "email": "s1@example.com", "salt": base64.b64encode(SALT).decode(),
                       "passwordHash": base64.b64encode(firebase_scrypt(b"pw-one-1", SALT)).decode()}]}
    r = requests.post(emu.url + PROJECT + "/accounts:batchCreate", json=body, headers=ADMIN)
    assert r.status_code == 200 and "error" not in r.json(), r.text
    assert emu.stop() == 0
    restarted = fresh("--data-dir", str(data))
    assert error_message(sign_in(restarted, "s1@example.com", "pw-one-2")) == "INVALID_LOGIN_CREDENTIALS"
    assert restarted.stop() == 0
    imported = fresh("--import", str(export))
    assert sign_in(imported, "s1@example.com", "pw-one-1").status_code == 200
    restarted = fresh("--data-dir", str(data))
    assert sign_in(restarted, "s1@example.com", "pw-one-1").status_code == 200
