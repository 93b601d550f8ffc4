"""The real Firebase JS SDK in a real browser (headless Chromium through Selenium), served from a page on a
developer's origin, against the release binary: the phone flow must keep working under the browser-origin policy,
and a page on a foreign origin must not be able to drive the emulator API.

Needs FIREBASE_SDK_DIR (a folder with node_modules/@firebase/{app,auth,util,component,logger}, idb and tslib; npm is
not reachable in CI, so this runs by hand), Debian's chromium and chromium-driver, and selenium from PyPI.
Skipped when any of them is missing.
"""
import http.server
import json
import os
import shutil
import socketserver
import threading

import pytest

from conftest import FICTIONAL, FICTIONAL_CODE, SDK_IMPORTS as IMPORTS, Emulator

SDK = os.environ.get("FIREBASE_SDK_DIR")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - depends on the machine
    webdriver = None

DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(
    not SDK or webdriver is None or not os.path.exists(DRIVER),
    reason="needs FIREBASE_SDK_DIR, chromium-driver and selenium")


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><script type="importmap">{"imports": %(imports)s}</script></head>
<body><div id="recaptcha"></div><pre id="out">running</pre>
<script type="module">
import { initializeApp } from "@firebase/app";
import { initializeAuth, inMemoryPersistence, connectAuthEmulator, signInWithPhoneNumber, RecaptchaVerifier } from "@firebase/auth";
const emulator = %(emulator)s;
const out = {};
try {
  const auth = initializeAuth(initializeApp({ apiKey: "fake-api-key", projectId: "demo-phone" }), { persistence: inMemoryPersistence });
  connectAuthEmulator(auth, emulator, { disableWarnings: true });
  const verifier = new RecaptchaVerifier(auth, "recaptcha", { size: "invisible" });
  const confirmation = await signInWithPhoneNumber(auth, %(phone)s, verifier);
  const cred = await confirmation.confirm(%(code)s);
  const result = await cred.user.getIdTokenResult(true);
  out.uid = cred.user.uid;
  out.phone = cred.user.phoneNumber;
  out.provider = result.signInProvider;
} catch (e) { out.error = String(e && e.code || e); }
// What a page on this origin may do with the emulator API.
try {
  const r = await fetch(emulator + "/emulator/v1/projects/demo-phone/verificationCodes");
  out.inboxStatus = r.status;
} catch (e) { out.inboxStatus = "blocked"; }
try {
  const r = await fetch(emulator + "/emulator/v1/projects/demo-phone/config", { method: "PATCH", body: JSON.stringify({ phoneAuth: { codeLength: 8 } }), headers: { "Content-Type": "text/plain" } });
  out.patchStatus = r.status;
} catch (e) { out.patchStatus = "blocked"; }
// A "simple" cross-site request: no preflight, so only the server can refuse its side effect.
try {
  await fetch(emulator + "/emulator/v1/clock:advance", { method: "POST", mode: "no-cors", body: '{"seconds":60}', headers: { "Content-Type": "text/plain" } });
} catch (e) {}
document.getElementById("out").textContent = JSON.stringify(out);
</script></body></html>
"""


def serve(host, page):
    """Serves `page` at / and the SDK's node_modules below it, on `host` and a free port."""
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=SDK, **kw)

        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path in ("/", "/index.html"):
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                super().do_GET()

        def guess_type(self, path):
            return "text/javascript" if str(path).endswith((".js", ".mjs")) else super().guess_type(path)

        def log_message(self, *a):
            pass

    server = socketserver.ThreadingTCPServer((host, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def browser():
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def emu():
    e = Emulator()
    yield e
    e.stop()


def run_page(browser, emu, host, page_host):
    page = PAGE % {"imports": json.dumps(IMPORTS), "emulator": json.dumps(emu.url), "phone": json.dumps(FICTIONAL),
                   "code": json.dumps(FICTIONAL_CODE)}
    server = serve(host, page)
    try:
        browser.get(f"http://{page_host}:{server.server_address[1]}/")
        WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "out").text != "running")
        return json.loads(browser.find_element("id", "out").text)
    finally:
        server.shutdown()
        server.server_close()


def test_sdk_phone_flow_from_a_localhost_page(browser, emu):
    out = run_page(browser, emu, "127.0.0.1", "localhost")
    assert out.get("error") is None, out
    assert out["phone"] == FICTIONAL and out["uid"] and out["provider"] == "phone"
    # A developer's own page may use the emulator API (its console, its test helpers).
    assert out["inboxStatus"] == 200 and out["patchStatus"] == 200, out
    r = emu.session.patch(emu.url + "/emulator/v1/projects/demo-phone/config", json={"phoneAuth": {"codeLength": 6}})
    assert r.status_code == 200
    assert emu.session.get(emu.url + "/emulator/v1/clock").json()["offsetSeconds"] == 60
    emu.session.post(emu.url + "/emulator/v1/clock:reset", json={})


def test_foreign_origin_page_cannot_drive_the_emulator_api(browser, emu):
    before = emu.session.get(emu.url + "/emulator/v1/projects/demo-phone/config").json()
    out = run_page(browser, emu, "127.0.0.2", "127.0.0.2")
    # The client-facing Google endpoints stay open to any origin, as in production...
    assert out.get("error") is None, out
    # ...but the page can neither read the inbox nor change the config, whatever the content type.
    assert out["inboxStatus"] != 200 and out["patchStatus"] != 200, out
    assert emu.session.get(emu.url + "/emulator/v1/projects/demo-phone/config").json() == before
    assert emu.session.get(emu.url + "/emulator/v1/clock").json()["offsetSeconds"] == 0


APP_CHECK_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><script type="importmap">{"imports": %(imports)s}</script></head>
<body><pre id="out">running</pre>
<script type="module">
import { initializeApp, _registerComponent } from "@firebase/app";
import { Component } from "@firebase/component";
import { initializeAuth, inMemoryPersistence, connectAuthEmulator, signInAnonymously } from "@firebase/auth";
const emulator = %(emulator)s;
const out = {};
// What the App Check SDK registers: Auth asks it for a token before every call and sends it as X-Firebase-AppCheck.
let token = null;
_registerComponent(new Component("app-check-internal", () => ({ getToken: async () => ({ token }) }), "PUBLIC"));
const auth = initializeAuth(initializeApp({ apiKey: "fake-api-key", projectId: "demo-phone" }), { persistence: inMemoryPersistence });
connectAuthEmulator(auth, emulator, { disableWarnings: true });
try { await signInAnonymously(auth); out.without = "signed in"; } catch (e) { out.without = String(e && e.code || e); }
const r = await fetch(emulator + "/emulator/v1/projects/demo-phone/appCredentials", { method: "POST", body: JSON.stringify({ type: "APP_CHECK" }) });
token = (await r.json()).token;
try { const c = await signInAnonymously(auth); out.with = c.user.uid ? "signed in" : "?"; } catch (e) { out.with = String(e && e.code || e); }
document.getElementById("out").textContent = JSON.stringify(out);
</script></body></html>
"""


def test_sdk_under_app_check_enforcement(browser):
    """The JS SDK's Auth sends App Check's token on every call; with ENFORCED, no token is refused and the SDK raises
    auth/firebase-app-check-token-is-invalid, as apps see it from production."""
    e = Emulator()
    try:
        import requests
        assert requests.patch(e.url + "/emulator/v1/projects/demo-phone/config", json={"appCheck": {"enforcement": "ENFORCED"}}).status_code == 200
        server = serve("127.0.0.1", APP_CHECK_PAGE % {"imports": json.dumps(IMPORTS), "emulator": json.dumps(e.url)})
        try:
            browser.get(f"http://localhost:{server.server_address[1]}/")
            WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "out").text != "running")
            out = json.loads(browser.find_element("id", "out").text)
        finally:
            server.shutdown()
            server.server_close()
        assert out == {"without": "auth/firebase-app-check-token-is-invalid", "with": "signed in"}, out
        metrics = requests.get(e.url + "/emulator/v1/projects/demo-phone/appCheck").json()["metrics"]
        assert metrics["refused"] == 1 and metrics["verified"] >= 1, metrics
    finally:
        e.stop()
