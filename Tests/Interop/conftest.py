"""Starts the real emulator binary on a free port for each test module and hands tests a small client."""
import base64
import contextlib
import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid

import shutil

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("PHONE_AUTH_EMULATOR_BIN", os.path.join(ROOT, ".build", "release", "phone-auth-emulator"))
FICTIONAL = "+16505554567"
FICTIONAL_CODE = "123456"


class Emulator:
    """A running phone-auth-emulator process."""

    def __init__(self, args=(), env=None, cwd=ROOT):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PHONE_AUTH_EMULATOR_") and k != "FIREBASE_AUTH_EMULATOR_HOST"}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [BINARY, "--port", "0", *args], cwd=cwd, env=full_env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on (http://\S+)", line)
        if not m:
            err = self.proc.stderr.read()
            raise RuntimeError(f"emulator did not start: {line!r} {err!r}")
        self.url = m.group(1)
        # Drain stderr continuously: an unread pipe would eventually fill up.
        self._log = []
        self._drain = threading.Thread(target=lambda: self._log.extend(iter(self.proc.stderr.readline, "")), daemon=True)
        self._drain.start()
        self.host_port = self.url.split("//", 1)[1]
        self.port = int(self.host_port.rsplit(":", 1)[1])
        self.session = requests.Session()

    # -- raw API helpers -------------------------------------------------
    def post(self, path, body=None, key="fake-api-key", headers=None, **kw):
        params = {"key": key} if key else {}
        return self.session.post(self.url + path, json=body if body is not None else {}, params=params, headers=headers or {}, **kw)

    def itk(self, op, body, **kw):
        return self.post(f"/identitytoolkit.googleapis.com/v1/accounts:{op}", body, **kw)

    def send(self, phone, **kw):
        r = self.itk("sendVerificationCode", {"phoneNumber": phone, **kw})
        assert r.status_code == 200, r.text
        return r.json()["sessionInfo"]

    def sign_in(self, phone=FICTIONAL, code=FICTIONAL_CODE, **extra):
        session = self.send(phone)
        r = self.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": code, **extra})
        assert r.status_code == 200, r.text
        return r.json()

    def code_for(self, phone, project="demo-phone"):
        r = self.session.get(f"{self.url}/emulator/v1/projects/{project}/verificationCodes", params={"phoneNumber": phone})
        return r.json()["verificationCodes"][-1]["code"]

    def log(self):
        """Everything the server wrote to stderr so far (complete after stop())."""
        return "".join(self._log)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.session.close()
        self._drain.join(5)
        return self.proc.returncode


def send_body(handler, status, body, content_type):
    """Answers an http.server request with `body` (bytes)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def send_json(handler, status, obj):
    send_body(handler, status, json.dumps(obj).encode(), "application/json")


def serve_in_background(handler_class, host="127.0.0.1"):
    """A threading HTTP server for `handler_class` on `host` and a free port, serving from a daemon thread."""
    server = http.server.ThreadingHTTPServer((host, 0), handler_class)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def error_message(resp):
    return resp.json()["error"]["message"]


@pytest.fixture(scope="module")
def emu():
    e = Emulator()
    yield e
    assert e.stop() == 0


@pytest.fixture
def fresh():
    """A dedicated server for tests that need their own state or flags."""
    started = []

    def start(*args, env=None):
        e = Emulator(args, env=env)
        started.append(e)
        return e

    yield start
    for e in started:
        e.stop()


# The Firebase JS SDK's ES modules under FIREBASE_SDK_DIR, as an import map for a test page (test_browser_sdk.py,
# test_provider_page.py).
SDK_IMPORTS = {
    "@firebase/app": "/node_modules/@firebase/app/dist/esm/index.esm.js",
    "@firebase/auth": "/node_modules/@firebase/auth/dist/esm/index.js",
    "@firebase/util": "/node_modules/@firebase/util/dist/index.esm.js",
    "@firebase/component": "/node_modules/@firebase/component/dist/esm/index.esm.js",
    "@firebase/logger": "/node_modules/@firebase/logger/dist/esm/index.esm.js",
    "idb": "/node_modules/idb/build/index.js",
    "tslib": "/node_modules/tslib/tslib.es6.mjs",
}

_DUMMY_KEY = None


def dummy_credential():
    """A syntactically valid service-account credential that never leaves the machine (for SDK code paths that
    insist on one, such as tenant_mgt.auth_for_tenant)."""
    global _DUMMY_KEY
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from firebase_admin import credentials
    if _DUMMY_KEY is None:
        _DUMMY_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return credentials.Certificate({"type": "service_account", "project_id": "demo-phone", "private_key_id": "test",
                                    "private_key": _DUMMY_KEY, "client_email": "test@demo-phone.iam.gserviceaccount.com",
                                    "token_uri": "https://oauth2.googleapis.com/token"})


@contextlib.contextmanager
def credentialed_app(prefix="app"):
    """A firebase-admin app for demo-phone with `dummy_credential()` (for SDK paths that insist on a credential:
    tenant_mgt, production-mode verification), deleted afterwards."""
    import firebase_admin
    app = firebase_admin.initialize_app(dummy_credential(), options={"projectId": "demo-phone"}, name=f"{prefix}-{uuid.uuid4()}")
    try:
        yield app
    finally:
        firebase_admin.delete_app(app)


def claims_of(token):
    """The payload of a JWT, without checking it."""
    p = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))


@pytest.fixture
def admin(fresh, monkeypatch):
    """A fresh emulator and a firebase-admin app pointed at it (FIREBASE_AUTH_EMULATOR_HOST)."""
    import firebase_admin
    emu = fresh()
    monkeypatch.setenv("FIREBASE_AUTH_EMULATOR_HOST", emu.host_port)
    app = firebase_admin.initialize_app(options={"projectId": "demo-phone"}, name=f"admin-{uuid.uuid4()}")
    yield emu, app
    firebase_admin.delete_app(app)


# -- a real browser (Debian's chromium and chromium-driver, selenium from PyPI) --------------------------------------
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - depends on the machine
    webdriver = None

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_BROWSER = webdriver is not None and os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)
if not HAVE_BROWSER and os.environ.get("CONSOLE_BROWSER_REQUIRED") == "1":
    raise RuntimeError("CONSOLE_BROWSER_REQUIRED=1 but chromium, chromium-driver or selenium is missing")


def headless_chromium(*flags, options=None):
    """Headless Chromium through chromedriver, with `flags` added."""
    opts = options or Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", *flags):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
