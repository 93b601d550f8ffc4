#!/usr/bin/env python3
"""Export and restart times at N users (issue 29): `restart_export.py N [BINARY] [--keep DIR]`.

Writes an N-user firebase-tools export (make_export.py), starts the server with `--data-dir D --import EXPORT`
(caps raised), times on-demand exports (`POST …:export`, three runs), stops it (SIGTERM), restarts it with
`--data-dir D` only and times until `GET /` answers 200, then exports once more and compares the two exports.
BINARY defaults to .build/release/phone-auth-emulator; RESTART_EXPORT_KEEP=FILE keeps the first accounts.json. Prints one line per measurement."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_export  # noqa: E402


def start(binary, *args):
    t = time.perf_counter()
    proc = subprocess.Popen([binary, "--port", "0", "--log-level", "error", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError(f"server did not start: {line!r}")
    url = "http://" + line.split("http://")[1].strip().rstrip("/")
    while True:
        try:
            with urllib.request.urlopen(url + "/", timeout=60) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.01)
    return proc, url, time.perf_counter() - t


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)


def export(url, path):
    req = urllib.request.Request(url + "/emulator/v1/projects/demo-phone:export", data=json.dumps({"path": path}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        body = json.loads(r.read())
    return time.perf_counter() - t, body["users"]


def main():
    n = int(sys.argv[1])
    binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(HERE), ".build", "release", "phone-auth-emulator")
    tmp = tempfile.mkdtemp(prefix="bench-restart-")
    try:
        src = os.path.join(tmp, "src")
        make_export.write_export(src, n)
        cap = str(max(n, 200_000))
        caps = ["--max-users", cap, "--max-users-total", cap, "--export-root", tmp]
        data = os.path.join(tmp, "data")
        proc, url, s = start(binary, "--data-dir", data, "--import", src, *caps)
        print(f"import {n} users into --data-dir, to first 200: {s:.2f} s", flush=True)
        try:
            for i in range(3):
                s, users = export(url, os.path.join(tmp, f"out{i}"))
                assert users == n, users
                print(f"export {n} users (run {i + 1}): {s:.2f} s", flush=True)
        finally:
            stop(proc)
        proc, url, s = start(binary, "--data-dir", data, *caps)
        print(f"restart from --data-dir with {n} users, to first 200: {s:.2f} s", flush=True)
        try:
            s, users = export(url, os.path.join(tmp, "after"))
            print(f"export after restart: {s:.2f} s ({users} users)", flush=True)
        finally:
            stop(proc)
        a = open(os.path.join(tmp, "out0", "auth_export", "accounts.json"), "rb").read()
        b = open(os.path.join(tmp, "after", "auth_export", "accounts.json"), "rb").read()
        print(f"accounts.json {len(a)} bytes; same after restart: {a == b}", flush=True)
        if os.environ.get("RESTART_EXPORT_KEEP"):
            shutil.copy(os.path.join(tmp, "out0", "auth_export", "accounts.json"), os.environ["RESTART_EXPORT_KEEP"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
