#!/usr/bin/env python3
"""Writes a firebase-tools emulator export of N users (phone, display name, claims: ~278 bytes a record,
one a line) for the import/export scaling points: `make_export.py DIR N`."""
import json
import os
import sys


def record(i):
    phone = f"+1555{i:07d}"
    return {
        "localId": f"u{i:010d}LoadTestUserXyz",
        "createdAt": str(1732950000000 + i),
        "displayName": f"Test User {i}",
        "phoneNumber": phone,
        "customAttributes": json.dumps({"role": "tester", "tier": i % 7}, separators=(",", ":")),
        "providerUserInfo": [{"providerId": "phone", "rawId": phone, "phoneNumber": phone}],
    }


def write_export(directory, n):
    """The export layout (metadata, auth_export/accounts.json and config.json); returns accounts.json's path."""
    auth = os.path.join(directory, "auth_export")
    os.makedirs(auth, exist_ok=True)
    with open(os.path.join(directory, "firebase-export-metadata.json"), "w") as f:
        json.dump({"version": "13.0.0", "auth": {"version": "13.0.0", "path": "auth_export"}}, f)
    with open(os.path.join(auth, "config.json"), "w") as f:
        json.dump({"signIn": {"allowDuplicateEmails": False}}, f)
    path = os.path.join(auth, "accounts.json")
    with open(path, "w") as f:
        f.write('{"kind": "identitytoolkit#DownloadAccountResponse", "users": [\n')
        for i in range(n):
            if i:
                f.write(",\n")
            f.write(json.dumps(record(i), separators=(",", ":")))
        f.write("\n]}\n")
    return path


if __name__ == "__main__":
    p = write_export(sys.argv[1], int(sys.argv[2]))
    print(p, os.path.getsize(p))
