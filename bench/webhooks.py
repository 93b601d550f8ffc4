#!/usr/bin/env python3
"""What a webhook whose receiver hangs costs the sign-in flow (docs/console-and-events.md "Webhooks"): run with the release binary built
(`swift build -c release --static-swift-stdlib`), `python3 bench/webhooks.py [--duration S] [--pairs N] [--flows N]`.

1. Rate: bench/flow.lua (send + sign-in, wrk as bench/measure.py runs it) on a fresh server without a webhook and on
   one whose webhook (every event type) points at a receiver that accepts connections and never answers, in
   alternating pairs (the order swapped each pair, so drift on a shared machine hits both).
2. Memory: the same hanging webhook and `--flows` sign-ins (100,000 by default: three events each reach the hook),
   the server's RSS before and after, next to a server without the webhook doing the same.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import Server, rss_mb, wrk, log  # noqa: E402

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def hanging_receiver():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    held = []

    def accept():
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}/hook", held


TYPES = None  # --types: the hook's event types (default: all)


def configure(srv, url):
    hook = {"id": "stuck", "url": url, "secret": SECRET}
    if TYPES:
        hook["types"] = TYPES
    body = {"events": {"webhooks": [hook]}}
    req = urllib.request.Request(f"{srv.url}/emulator/v1/projects/demo-phone/config", data=json.dumps(body).encode(),
                                 method="PATCH", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200


def hook_status(srv):
    with urllib.request.urlopen(f"{srv.url}/emulator/v1/projects/demo-phone/webhooks", timeout=30) as r:
        return json.loads(r.read())["webhooks"]


def flows_of(result):
    line = [l for l in result["raw"].splitlines() if l.startswith("FLOWS")]
    return int(line[0].split()[1]) if line else 0


def run(hook_url, d, c):
    srv = Server()
    try:
        if hook_url:
            configure(srv, hook_url)
        wrk(srv.url, "flow.lua", 1, c, server_pid=srv.proc.pid)  # warm-up (the signing key, the connections)
        r = wrk(srv.url, "flow.lua", d, c, server_pid=srv.proc.pid)
        hooks = hook_status(srv) if hook_url else []
        return {"flows_per_s": flows_of(r) / d, "rps": r["rps"], "p99_ms": r["p99_ms"], "non_2xx": r["non_2xx"],
                "cpu_us_per_request": r["server_cpu_us_per_request"],
                "voluntary_cs_per_request": r["voluntary_context_switches_per_request"],
                "foreign_cpu_share": r["foreign_cpu_share"], "hook": hooks[0] if hooks else None}
    finally:
        srv.stop()


def memory(hook_url, flows, c):
    srv = Server()
    try:
        if hook_url:
            configure(srv, hook_url)
        wrk(srv.url, "flow.lua", 1, c, server_pid=srv.proc.pid)
        before = rss_mb(srv.proc.pid)
        done, samples = 0, []
        while done < flows:
            r = wrk(srv.url, "flow.lua", 10, c, server_pid=srv.proc.pid)
            done += flows_of(r)
            samples.append(round(rss_mb(srv.proc.pid), 1))
        hooks = hook_status(srv) if hook_url else []
        return {"flows": done, "rss_before_mb": round(before, 1), "rss_after_mb": samples[-1], "rss_samples_mb": samples,
                "hook": hooks[0] if hooks else None}
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--types", help="comma-separated event types for the hook (default: all)")
    a = ap.parse_args()
    global TYPES
    TYPES = a.types.split(",") if a.types else None
    url, held = hanging_receiver()
    pairs = []
    for i in range(a.pairs):
        order = [None, url] if i % 2 == 0 else [url, None]
        got = {}
        for u in order:
            got["hanging" if u else "none"] = run(u, a.duration, a.connections)
            log(f"pair {i + 1} {'hanging' if u else 'none'}: {got['hanging' if u else 'none']['flows_per_s']:.0f} flows/s")
        pairs.append(got)
    out = {"pairs": pairs,
           "median_flows_per_s": {k: statistics.median(p[k]["flows_per_s"] for p in pairs) for k in ("none", "hanging")},
           "held_connections": len(held)}
    if not a.skip_memory:
        out["memory"] = {"none": memory(None, a.flows, a.connections), "hanging": memory(url, a.flows, a.connections)}
    for p in pairs:
        for v in p.values():
            v.pop("raw", None)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
