"""Webhooks and the Functions emulator's auth triggers against the release binary (docs/console-and-events.md "Webhooks").

A real receiver (Python's http.server on loopback) gets the POSTs; signatures are checked with Python's own hmac and
with the `standardwebhooks` package from PyPI (the Standard Webhooks reference library), never with our code. No
assertion on timing: waits are bounded polls, and tests assert on counts.
"""
import base64
import hashlib
import hmac
import json
import os
import socket
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import standardwebhooks

from conftest import Emulator, FICTIONAL

SECRET = "whsec_" + base64.b64encode(b"phone-auth-emulator-webhook-key!").decode()  # 32 bytes
PROJECT = "demo-phone"


class Receiver:
    """Records every POST (path, headers, raw body); `answer(n, path, body)` decides the status of the nth one."""

    def __init__(self, answer=lambda n, path, body: 200):
        self.got = []
        self.lock = threading.Lock()
        self.answer = answer
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    n = len(outer.got)
                status = outer.answer(n, self.path, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def requests(self):
        with self.lock:
            return list(self.got)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(answer=lambda n, path, body: 200):
        r = Receiver(answer)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def eventually(what, condition, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


def configure(emu, events, tenant=None):
    path = f"/emulator/v1/projects/{PROJECT}" + (f"/tenants/{tenant}" if tenant else "") + "/config"
    r = emu.session.patch(emu.url + path, json={"events": events})
    assert r.status_code == 200, r.text
    return r.json()


def status(emu):
    return emu.session.get(f"{emu.url}/emulator/v1/projects/{PROJECT}/webhooks").json()


def stream(emu):
    """Every retained event as the stream's JSON lines (bytes, in order)."""
    r = emu.session.get(f"{emu.url}/emulator/v1/projects/{PROJECT}/events",
                        params={"format": "jsonl", "since": "0", "follow": "false"})
    assert r.status_code == 200
    return [line for line in r.content.split(b"\n") if line]


def independent_signature(secret, msg_id, timestamp, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, msg_id.encode() + b"." + timestamp.encode() + b"." + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def sign_in_new(emu, n):
    phone = f"+1555555{n:04d}"
    session = emu.send(phone)
    r = emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": emu.code_for(phone)})
    assert r.status_code == 200, r.text
    return r.json()


def test_every_event_once_in_order_signed(fresh, receiver):
    rx = receiver()
    emu = fresh()
    configure(emu, {"webhooks": [{"id": "ci", "url": rx.url + "/hook", "secret": SECRET}]})
    for i in range(15):
        sign_in_new(emu, i)
        emu.sign_in()  # the fictional number: a new user once, then sign-ins
    lines = stream(emu)
    expected = lines[next(i for i, l in enumerate(lines) if json.loads(l)["type"] == "config.changed"):]
    assert len(expected) >= 1 + 15 * 7
    eventually("every event delivered", lambda: len(rx.requests()) >= len(expected))
    time.sleep(0.2)  # nothing more comes (a duplicate would show here)
    got = rx.requests()
    assert [body for _, _, body in got] == expected, "each event once, in order, as the stream's JSON"
    verifier = standardwebhooks.Webhook(SECRET)
    ids = set()
    for path, headers, body in got:
        assert path == "/hook"
        assert headers["content-type"] == "application/json"
        msg_id, ts = headers["webhook-id"], headers["webhook-timestamp"]
        assert "." not in msg_id and msg_id not in ids
        ids.add(msg_id)
        assert headers["webhook-signature"] == independent_signature(SECRET, msg_id, ts, body)
        assert verifier.verify(body, headers) == json.loads(body)  # also checks the timestamp is within 5 minutes
        assert msg_id.endswith("_" + str(json.loads(body)["id"]))
    s = status(emu)["webhooks"][0]
    eventually("counted", lambda: status(emu)["webhooks"][0]["delivered"] == len(got))
    assert s["id"] == "ci" and s["failed"] == 0 and s["dropped"] == 0


def test_a_tampered_body_or_wrong_secret_fails_verification(fresh, receiver):
    rx = receiver()
    emu = fresh()
    configure(emu, {"webhooks": [{"url": rx.url, "secret": SECRET, "types": ["user.created"]}]})
    emu.sign_in()
    eventually("one delivery", lambda: rx.requests())
    _, headers, body = rx.requests()[0]
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(body.replace(b"phone", b"phony"), headers)
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(other).verify(body, headers)


def test_retried_after_a_500_with_the_same_id(fresh, receiver):
    rx = receiver(lambda n, path, body: 500 if n <= 2 else 200)
    emu = fresh()
    configure(emu, {"webhooks": [{"url": rx.url, "secret": SECRET, "types": ["user.created", "tokens.issued"]}]})
    emu.sign_in()
    eventually("delivered after two failures", lambda: status(emu)["webhooks"][0]["delivered"] == 2)
    got = rx.requests()
    types = [json.loads(b)["type"] for _, _, b in got]
    assert types == ["user.created", "user.created", "user.created", "tokens.issued"]
    assert len({h["webhook-id"] for _, h, _ in got[:3]}) == 1, "a retry is the same message"
    for _, h, b in got:
        assert h["webhook-signature"] == independent_signature(SECRET, h["webhook-id"], h["webhook-timestamp"], b)
    s = status(emu)["webhooks"][0]
    assert s["attempts"] == 4 and s["failed"] == 0 and s["lastStatus"] == 200


def hanging_listener():
    """A receiver that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held = []
    stop = threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()

    def close():
        stop.set()
        for c in held:
            c.close()
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", held, close


def test_a_hanging_receiver_does_not_slow_sign_ins(fresh, receiver):
    url, held, close = hanging_listener()
    rx = receiver()
    try:
        emu = fresh()
        configure(emu, {"webhooks": [{"id": "stuck", "url": url, "secret": SECRET},
                                     {"id": "fine", "url": rx.url, "secret": SECRET, "types": ["user.created"]}]})
        n = 200
        for i in range(n):
            sign_in_new(emu, i)  # every one succeeds while the first hook's receiver hangs
        eventually("the stuck hook holds a connection", lambda: held)
        hooks = {h["id"]: h for h in status(emu)["webhooks"]}
        assert hooks["stuck"]["inFlight"] is True and hooks["stuck"]["delivered"] == 0
        assert hooks["stuck"]["queued"] <= 10_000  # the queue's bound (memory: Swift WebhookDeliveryTests)
        assert hooks["stuck"]["queued"] >= n * 4 - 1 - hooks["stuck"]["attempts"]
        # The other hook is not held up by the stuck one.
        eventually("the healthy hook got every user", lambda: status(emu)["webhooks"][1]["delivered"] == n)
        assert len(rx.requests()) == n
    finally:
        close()


def test_functions_emulator_triggers_in_both_formats(fresh, receiver):
    fn = receiver()
    emu = fresh()
    configure(emu, {"functionsEmulator": {"url": fn.url}})
    user = emu.sign_in()
    uid = user["localId"]
    r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/{PROJECT}/accounts:delete",
                         json={"localId": uid}, headers={"Authorization": "Bearer owner"})
    assert r.status_code == 200, r.text
    eventually("create and delete, two formats each", lambda: len(fn.requests()) == 4)
    got = fn.requests()
    assert {p for p, _, _ in got} == {f"/functions/projects/{PROJECT}/trigger_multicast"}
    legacy = [(h, json.loads(b)) for _, h, b in got if h["content-type"] == "application/json"]
    cloud = [(h, json.loads(b)) for _, h, b in got if "cloudevent" in h["content-type"]]
    assert len(legacy) == 2 and len(cloud) == 2
    # firebase-tools' own test of its Auth emulator (src/emulator/auth/cloudFunctions.spec.ts) expects this shape.
    create = legacy[0][1]
    assert set(create) == {"eventId", "eventType", "resource", "params", "timestamp", "data"}
    uuid.UUID(create["eventId"])
    assert create["eventType"] == "providers/firebase.auth/eventTypes/user.create"
    assert create["resource"] == {"name": f"projects/{PROJECT}", "service": "firebaseauth.googleapis.com"}
    assert create["params"] == {}
    assert create["data"]["uid"] == uid and create["data"]["phoneNumber"] == FICTIONAL
    assert create["data"]["customClaims"] == {}
    assert create["data"]["metadata"]["creationTime"].endswith("Z")
    assert create["data"]["providerData"] == [{"rawId": FICTIONAL, "providerId": "phone", "phoneNumber": FICTIONAL}]
    delete = legacy[1][1]
    assert delete["eventType"] == "providers/firebase.auth/eventTypes/user.delete"
    assert delete["data"]["uid"] == uid and delete["data"]["phoneNumber"] == FICTIONAL, "the record as it was"
    # v2: what the Functions emulator routes by `type` (Content-Type with "cloudevent") and firebase-functions'
    # identity.onUserCreated / onUserDeleted unpack (data.value / data.oldValue).
    created, deleted = cloud[0][1], cloud[1][1]
    assert cloud[0][0]["content-type"].startswith("application/cloudevents+json")
    assert created["specversion"] == "1.0" and created["type"] == "google.firebase.auth.user.v2.created"
    assert created["source"] == f"//firebaseauth.googleapis.com/projects/{PROJECT}"
    assert created["data"]["value"]["uid"] == uid
    assert deleted["type"] == "google.firebase.auth.user.v2.deleted" and deleted["data"]["oldValue"]["uid"] == uid
    assert "webhook-signature" not in cloud[0][0]


def test_hooks_from_the_config_file_and_refusals(tmp_path, receiver):
    rx = receiver()
    cfg = tmp_path / "emulator.json"
    cfg.write_text(json.dumps({"projectId": PROJECT, "projects": {PROJECT: {
        "signIn": {"phoneNumber": {"testPhoneNumbers": {FICTIONAL: "123456"}}},
        "events": {"webhooks": [{"id": "file", "url": rx.url, "secret": SECRET, "types": ["user.created"]}]}}}}))
    emu = Emulator(["--config", str(cfg)])
    try:
        emu.sign_in()
        eventually("delivered", lambda: rx.requests())
        assert json.loads(rx.requests()[0][2])["type"] == "user.created"
        assert status(emu)["webhooks"][0]["id"] == "file"
        for bad, words in [({"webhooks": [{"url": "https://example.com/", "secret": SECRET}]}, "only http://"),
                           ({"webhooks": [{"url": rx.url, "secret": "whsec_short"}]}, "whsec_"),
                           ({"webhooks": [{"url": rx.url}]}, "is required"),
                           ({"functionsEmulator": {"url": "http://127.0.0.1:5001", "formats": ["v9"]}}, "v1")]:
            r = emu.session.patch(f"{emu.url}/emulator/v1/projects/{PROJECT}/config", json={"events": bad})
            assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
        assert status(emu)["webhooks"][0]["id"] == "file", "a refused change stores nothing"
    finally:
        assert emu.stop() == 0
    # A bad hook in the file stops the server at start with the key's path.
    cfg.write_text(json.dumps({"projects": {PROJECT: {"events": {"webhooks": [{"url": "https://x/", "secret": SECRET}]}}}}))
    with pytest.raises(RuntimeError, match="events.webhooks"):
        Emulator(["--config", str(cfg)])
