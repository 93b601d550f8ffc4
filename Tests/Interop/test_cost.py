"""Requests that used to stall the server (issue 11): quadratic JSON objects, inbox reads that scanned every pending
session, and long-polls that outlived their clients. Every wait here is bounded; nothing asserts a duration."""
import concurrent.futures
import json
import os
import socket
import threading
import time

import requests

from conftest import Emulator

SEND = "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k"
CODES = "/emulator/v1/projects/demo-phone/verificationCodes"


def megabyte_of_keys():
    """The issue's body: 1 MiB, one object of ~110k short keys."""
    parts, size, k = [], 2, 0
    while size < (1 << 20) - 16:
        p = f'"{k}":0'
        parts.append(p)
        size += len(p) + 1
        k += 1
    return ("{" + ",".join(parts) + "}").encode(), k


def raw_request(port, data, timeout=30):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def post_raw(port, path, body):
    head = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    return raw_request(port, head + body)


def test_four_megabyte_bodies_of_110k_keys_do_not_stall_the_server(fresh):
    e = fresh()
    body, keys = megabyte_of_keys()
    assert keys > 100_000
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(post_raw, e.port, SEND, body) for _ in range(4)]
        # While they are in flight, the server answers others promptly (the old parser took > 20 s here).
        r = requests.get(e.url + "/", timeout=10)
        assert r.status_code == 200
        for f in futures:
            resp = f.result(timeout=30)
            assert resp.startswith(b"HTTP/1.1 400"), resp[:200]
            err = json.loads(resp.split(b"\r\n\r\n", 1)[1])["error"]
            assert err["status"] == "INVALID_ARGUMENT"
            assert err["message"].startswith("Invalid JSON payload received. Too many keys in one object (more than 10000)")
    assert requests.get(e.url + "/", timeout=10).status_code == 200


def test_large_objects_under_the_cap_are_parsed_in_linear_time(fresh):
    """~1 MiB of objects just under the key cap is accepted and answered (hash-indexed objects, not n² scans)."""
    e = fresh()
    inner = ",".join(f'"k{k}":0' for k in range(9_999))
    members = []
    size = 0
    while size < (1 << 20) - 200_000:
        m = f'"o{len(members)}":{{{inner}}}'
        members.append(m)
        size += len(m) + 1
    body = ('{"phoneNumber":"+15550001234",' + ",".join(members) + "}").encode()
    assert len(body) < 1 << 20
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(post_raw, e.port, SEND, body) for _ in range(4)]
        assert requests.get(e.url + "/", timeout=10).status_code == 200
        for f in futures:
            resp = f.result(timeout=30)
            assert resp.startswith(b"HTTP/1.1 200"), resp[:300]


def test_duplicate_keys_last_wins(emu):
    r = requests.post(emu.url + SEND, data=b'{"phoneNumber":"bad","phoneNumber":"+15550004321"}',
                      headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 200, r.text
    codes = requests.get(emu.url + CODES, params={"phoneNumber": "+15550004321"}, timeout=10).json()["verificationCodes"]
    assert len(codes) == 1


def wait_request(phone, timeout=300, project="demo-phone"):
    return (f"GET /emulator/v1/projects/{project}/verificationCodes:wait?phoneNumber=%2B{phone[1:]}&timeoutSeconds={timeout} "
            "HTTP/1.1\r\nHost: localhost\r\n\r\n").encode()


def open_sockets(pid):
    """The server's open sockets (the listener and connections). Only sockets: the event loops' epoll, eventfd and
    timer descriptors may still be opening when the test begins (a count of every descriptor failed CI that way)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return n


def test_abandoned_long_polls_are_dropped_at_once(fresh):
    """5,000 `:wait` requests that connect and close at once: the server stays responsive and their waiters are
    gone (the per-project cap of 1,000 has room again), instead of staying registered for 300 s."""
    e = fresh()
    baseline = open_sockets(e.proc.pid)
    for i in range(5000):
        s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
        s.sendall(wait_request(f"+1555{i:07d}"))
        s.close()
    assert requests.get(e.url + "/", timeout=10).status_code == 200
    # Every abandoned poll's connection is gone (closed by the server) before the cap is probed: one still in flight
    # would hold a slot for a moment, and a held poll below could be refused in its place (the probe then never sees
    # 1,000). A bound on waiting, not a timing assertion.
    for _ in range(600):
        if open_sockets(e.proc.pid) <= baseline + 1:
            break
        time.sleep(0.1)
    assert open_sockets(e.proc.pid) <= baseline + 1, "every abandoned long poll's connection is closed"
    # Open polls still count against the cap; closed ones do not. Bounded retries while the closes are processed.
    for _ in range(100):
        r = requests.get(e.url + CODES + ":wait", params={"phoneNumber": "+15559990000", "timeoutSeconds": "0.2"}, timeout=10)
        if r.status_code != 429:
            break
        time.sleep(0.1)
    assert r.status_code == 404, r.text
    # And 1,000 live polls fit again, the 1,001st is refused with RESOURCE_EXHAUSTED.
    held = []
    try:
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
            s.sendall(wait_request(f"+1444{i:07d}"))
            held.append(s)
        # A bound on waiting for the 1,000 requests to be read and registered (a loaded CI machine once needed more
        # than 10 s), not a timing assertion.
        for _ in range(600):
            r = requests.get(e.url + CODES + ":wait", params={"phoneNumber": "+15559990001", "timeoutSeconds": "0.2"}, timeout=10)
            if r.status_code == 429:
                break
            # The probe itself holds a slot for 0.2 s: a held poll registered in that moment is refused (429) in its
            # place, and then 999 are held. Replace any refused one (nothing else may answer a held poll).
            for idx, s in enumerate(held):
                s.setblocking(False)
                try:
                    got = s.recv(200)
                except BlockingIOError:
                    continue
                assert got.startswith(b"HTTP/1.1 429"), f"a held long poll was answered: {got!r}"
                s.close()
                s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
                s.sendall(wait_request(f"+1444{idx:07d}"))
                held[idx] = s
            time.sleep(0.1)
        assert r.status_code == 429, r.text
        assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
        # And none of the 1,000 held polls was refused or answered: they all hold a slot.
        for s in held:
            s.setblocking(False)
            try:
                got = s.recv(200)
            except BlockingIOError:
                continue
            raise AssertionError(f"a held long poll was answered or closed: {got!r}")
    finally:
        for s in held:
            s.close()


def cpu_seconds(pid):
    import os
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_half_closed_long_poll_is_cancelled_and_costs_no_cpu(fresh):
    e = fresh()
    e.sign_in()  # the signing key is generated in the background at start: let that CPU work finish first
    s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
    s.sendall(wait_request("+15550007777"))
    s.shutdown(socket.SHUT_WR)
    # The poll is cancelled and its connection closed (a half-closed long poll used to spin a loop at 100% CPU).
    assert s.recv(1024) == b""
    s.close()
    before = cpu_seconds(e.proc.pid)
    time.sleep(1)
    assert cpu_seconds(e.proc.pid) - before < 0.3


def bulk_send(port, phones):
    """Pipelined sends on one keep-alive connection, 200 at a time; returns how many were answered 200."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    ok = 0
    try:
        for start in range(0, len(phones), 200):
            batch = phones[start:start + 200]
            data = b"".join(
                (f"POST {SEND} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\n\r\n").encode() + b
                for b in (f'{{"phoneNumber":"{p}"}}'.encode() for p in batch))
            s.sendall(data)
            buf = b""
            while buf.count(b"HTTP/1.1 ") < len(batch) or not buf.endswith(b"}"):
                chunk = s.recv(1 << 20)
                assert chunk, "server closed the connection"
                buf += chunk
            ok += buf.count(b"HTTP/1.1 200")
    finally:
        s.close()
    return ok


def test_inbox_reads_with_100k_pending_sessions_do_not_starve_sends(fresh):
    e = fresh()
    phones = [f"+1555{i:07d}" for i in range(100_000)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        made = sum(pool.map(lambda k: bulk_send(e.port, phones[k::4]), range(4)))
    assert made == 100_000
    # The unfiltered list is paged (1,000 by default), with a token for the rest.
    page = requests.get(e.url + CODES, timeout=10).json()
    assert len(page["verificationCodes"]) == 1000 and "nextPageToken" in page
    nxt = requests.get(e.url + CODES, params={"pageToken": page["nextPageToken"], "pageSize": "10000"}, timeout=10).json()
    assert len(nxt["verificationCodes"]) == 10_000
    seen = {c["sessionInfo"] for c in page["verificationCodes"]} | {c["sessionInfo"] for c in nxt["verificationCodes"]}
    assert len(seen) == 11_000

    stop = threading.Event()
    polls = [0, 0]

    def poller(n):
        sess = requests.Session()
        while not stop.is_set():
            if n == 0:
                r = sess.get(e.url + CODES, params={"phoneNumber": "+15550012345"}, timeout=10)
                assert r.status_code == 200 and len(r.json()["verificationCodes"]) == 1
            else:
                r = sess.get(e.url + CODES + ":wait", params={"phoneNumber": "+15550054321", "timeoutSeconds": "0"}, timeout=10)
                assert r.status_code == 200
            polls[n] += 1

    threads = [threading.Thread(target=poller, args=(n,), daemon=True) for n in range(2)]
    for t in threads:
        t.start()
    try:
        # 2,000 more sends while both pollers hammer the inbox: they all complete (bounded by the timeout), and the
        # pollers keep being answered too (the old code scanned all 100k sessions, twice for :wait, per poll).
        sent = bulk_send(e.port, [f"+1666{i:07d}" for i in range(2000)])
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert sent == 2000
    assert polls[0] > 0 and polls[1] > 0
    assert requests.get(e.url + "/", timeout=10).status_code == 200
    # Deleting one number's codes touches only that number.
    r = requests.delete(e.url + CODES, params={"phoneNumber": "+15550012345"}, timeout=10)
    assert r.json() == {"deleted": 1}
