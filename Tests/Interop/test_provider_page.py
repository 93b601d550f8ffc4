"""The provider page (issue 25, item 3) in a real browser: headless Chromium through Selenium against the release binary.

A tiny app page on its own origin does what the Firebase JS SDK does for signInWithPopup / signInWithRedirect: it
embeds /emulator/auth/iframe through gapi.iframes and opens /emulator/auth/handler (a popup, or the same tab). The test
drives the account chooser with the keyboard and checks the AuthEvent the iframe hands the app, byte for byte what the
official emulator's page produces. Offline, Google's gapi loader cannot load: the browser reaches a stand-in
(fixtures/fake_gapi.js) served as https://apis.google.com over TLS through --host-resolver-rules, which also proves
the iframe's Content-Security-Policy admits the real loader's address. Screenshots go to $CONSOLE_SCREENSHOTS.

With FIREBASE_SDK_DIR (node_modules/@firebase/{app,auth,…}) the real SDK runs signInWithPopup and signInWithRedirect
against the page too, and the request it then posts to accounts:signInWithIdp is checked.
"""
import datetime
import http.server
import json
import os
import re
import ssl
import tempfile
import threading
import urllib.parse

import pytest

from conftest import HAVE_BROWSER, SDK_IMPORTS, headless_chromium

if HAVE_BROWSER:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.skipif(not HAVE_BROWSER, reason="needs chromium, chromium-driver and selenium")

HERE = os.path.dirname(os.path.abspath(__file__))
SHOTS = os.environ.get("CONSOLE_SCREENSHOTS") or tempfile.mkdtemp(prefix="console-shots-")
SDK = os.environ.get("FIREBASE_SDK_DIR")
WAIT = 10
KEY, APP = "fake-api-key", "[DEFAULT]"
STORAGE_KEY = f"firebase:redirectEvent:{KEY}:{APP}"
ADMIN = {"Authorization": "Bearer owner"}


def encode_uri_component(s):
    """JavaScript's encodeURIComponent."""
    return urllib.parse.quote(s, safe="-_.!~*'()")


def js_json(value):
    """JavaScript's JSON.stringify (no spaces, key order kept, non-ASCII as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- servers --------------------------------------------------------------------------------------------------------

class Site:
    """A small web server on 127.0.0.1: registered paths, plus the files below `directory` under /node_modules/ (the
    SDK's modules); over TLS with `tls` (certificate and key files)."""

    def __init__(self, directory=None, tls=None):
        self.files = {}
        files = self.files

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=directory or HERE, **kw)

            def setup(self):
                # The TLS handshake in this connection's thread: done in accept(), a browser's idle preconnect would
                # stall the whole server.
                if tls:
                    self.request.do_handshake()
                super().setup()

            def do_GET(self):  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path in files:
                    content_type, body = files[path]
                    self.send_response(200)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif directory and path.startswith("/node_modules/"):
                    super().do_GET()
                else:
                    self.send_error(404)

            def guess_type(self, path):
                return "text/javascript" if str(path).endswith((".js", ".mjs")) else super().guess_type(path)

            def log_message(self, *a):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.server = server
        self.port = server.server_address[1]
        # For the app: the same site as the emulator (127.0.0.1, another port), so the iframe shares sessionStorage
        # with the handler's tab, as on a developer's machine (localhost:3000 and localhost:9099).
        self.origin = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def add(self, path, body, content_type="text/html; charset=utf-8"):
        self.files[path] = (content_type, body.encode() if isinstance(body, str) else body)
        return self.origin + path

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def fake_google():
    """https://apis.google.com/js/api.js as fixtures/fake_gapi.js, with a self-signed certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "apis.google.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("apis.google.com")]), False).sign(key, hashes.SHA256()))
    d = tempfile.mkdtemp(prefix="fake-google-")
    paths = (os.path.join(d, "cert.pem"), os.path.join(d, "key.pem"))
    with open(paths[0], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    site = Site(tls=paths)
    with open(os.path.join(HERE, "fixtures", "fake_gapi.js"), "rb") as f:
        site.add("/js/api.js", f.read(), "text/javascript")
    return site


def make_browser(gapi_port, width=900, height=800):
    """Chromium whose apis.google.com is `gapi_port` on this machine (a closed port: gapi never loads)."""
    opts = Options()
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return headless_chromium(f"--window-size={width},{height}", f"--host-resolver-rules=MAP apis.google.com 127.0.0.1:{gapi_port}",
                             "--ignore-certificate-errors", "--disable-popup-blocking", options=opts)


def closing(make):
    """A module fixture of what `make()` returns, closed at the end."""
    @pytest.fixture(scope="module")
    def fixture():
        thing = make()
        yield thing
        thing.close()
    return fixture


google = closing(fake_google)
pages = closing(lambda: Site(directory=SDK))


@pytest.fixture(scope="module")
def browser(google):
    d = make_browser(google.port)
    yield d
    d.quit()


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SHOTS, f"provider-page-{name}.png"))


def csp_problems(driver):
    """Console errors about the Content-Security-Policy or failed scripts since the last call."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and ("Content Security Policy" in e["message"] or "Refused" in e["message"])]


def link_provider(emu, uid, info, tenant=None):
    base = f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (f"/tenants/{tenant}" if tenant else "")
    r = emu.session.post(base + "/accounts", json={"localId": uid}, headers=ADMIN)
    assert r.status_code == 200, r.text
    r = emu.session.post(base + "/accounts:update", json={"localId": uid, "linkProviderUserInfo": info}, headers=ADMIN)
    assert r.status_code == 200, r.text


# -- the app page: what the SDK does around the provider page -------------------------------------------------------

APP_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>app</title></head><body>
<button id="go" disabled>Sign in</button><pre id="out"></pre>
%(gapi)s
<script>
var EMU = %(emu)s, KEY = %(key)s, APP = %(app)s;
window.events = []; window.webStorage = null; window.ready = false;
var frameQuery = new URLSearchParams({apiKey: KEY, appName: APP, v: '12.14.0', eid: 'p'});
function markReady() { window.ready = true; document.getElementById('go').disabled = false; }
if (%(nogapi)s) {
  // The iframe alone, as it is when gapi cannot load: it keeps what it receives in sessionStorage.
  var f = document.createElement('iframe');
  f.src = EMU + '/emulator/auth/iframe?' + frameQuery;
  f.onload = markReady;
  document.body.appendChild(f);
} else {
  // What the JS SDK's _openIframe and BrowserPopupRedirectResolver do.
  gapi.load('gapi.iframes', {callback: function () {
    gapi.iframes.getContext().open({where: document.body, url: EMU + '/emulator/auth/iframe?' + frameQuery,
        messageHandlersFilter: gapi.iframes.CROSS_ORIGIN_IFRAMES_FILTER, dontclear: true,
        attributes: {style: {position: 'absolute', top: '-100px', width: '1px', height: '1px'}, 'aria-hidden': 'true', tabindex: '-1'}},
      function (iframe) { return iframe.ping().then(function () { return iframe; }); }
    ).then(function (iframe) {
      iframe.register('authEvent', function (e) {
        window.events.push(e);
        document.getElementById('out').textContent = JSON.stringify(window.events);
        return {status: 'ACK'};
      }, gapi.iframes.CROSS_ORIGIN_IFRAMES_FILTER);
      iframe.send('webStorageSupport', {type: 'webStorageSupport'}, function (r) { window.webStorage = r; }, gapi.iframes.CROSS_ORIGIN_IFRAMES_FILTER);
      markReady();
    });
  }});
}
document.getElementById('go').addEventListener('click', function () {
  var p = new URLSearchParams({apiKey: KEY, appName: APP, authType: %(authType)s, redirectUrl: location.href, v: '12.14.0',
                               eventId: %(eventId)s, providerId: %(provider)s, scopes: 'profile'});
  if (%(tid)s) p.set('tid', %(tid)s);
  var url = EMU + '/emulator/auth/handler?' + p;
  if (/popup/i.test(%(authType)s)) window.open(url, 'idp' + Date.now(), 'width=500,height=600'); else location.assign(url);
});
</script></body></html>"""


def app_page(pages, emu, path, auth_type, provider="google.com", event_id="1234567890", tid=None, nogapi=False):
    gapi = "" if nogapi else '<script src="https://apis.google.com/js/api.js"></script>'
    return pages.add(path, APP_PAGE % {
        "gapi": gapi, "emu": json.dumps(emu.url), "key": json.dumps(KEY), "app": json.dumps(APP), "authType": json.dumps(auth_type),
        "eventId": json.dumps(event_id), "provider": json.dumps(provider), "tid": json.dumps(tid), "nogapi": json.dumps(nogapi)})


def wait_ready(driver):
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return window.ready === true"))


def page_events(driver):
    """What the app page's iframe handed it, in order (through JSON: the driver's own conversion loses key order)."""
    return json.loads(driver.execute_script("return JSON.stringify(window.events || [])"))


def auth_events(driver):
    return [e for e in page_events(driver) if e.get("type") == "authEvent"]


def active_id(driver):
    return driver.switch_to.active_element.get_attribute("id")


def tab_to(driver, element_id, limit=12):
    """Moves the focus with Tab until `element_id` has it (fails if it never does)."""
    for _ in range(limit):
        if active_id(driver) == element_id:
            return
        driver.switch_to.active_element.send_keys(Keys.TAB)
    assert active_id(driver) == element_id


def open_popup(driver):
    main = driver.current_window_handle
    before = set(driver.window_handles)
    driver.find_element(By.ID, "go").click()
    WebDriverWait(driver, WAIT).until(lambda d: len(set(d.window_handles) - before) == 1)
    popup = (set(driver.window_handles) - before).pop()
    driver.switch_to.window(popup)
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.readyState") == "complete")
    return main, popup


def check_url_response(emu, event, provider="google.com"):
    """The urlResponse's parts: this page's URL, the provider, the claims (returned) encoded as encodeURIComponent."""
    url = event["urlResponse"]
    prefix = f"{emu.url}/emulator/auth/handler?providerId={encode_uri_component(provider)}&id_token="
    assert url.startswith(prefix), url
    token = url[len(prefix):].split("&", 1)[0]
    claims = json.loads(urllib.parse.unquote(token))
    assert token == encode_uri_component(js_json(claims)), token
    return claims, url


# -- tests ----------------------------------------------------------------------------------------------------------

def test_popup_adds_a_new_account_with_the_keyboard(browser, emu, pages):
    link_provider(emu, "kb-existing", {"providerId": "google.com", "rawId": "g-existing", "email": "old@example.com", "displayName": "Old User"})
    browser.get(app_page(pages, emu, "/popup.html", "signInViaPopup", event_id="55501"))
    wait_ready(browser)
    # The iframe answered the SDK's webStorageSupport, and said there was no pending redirect event.
    assert browser.execute_script("return window.webStorage") == [{"status": "ACK", "webStorageSupport": True}]
    assert page_events(browser) == [{"type": "authEvent", "authEvent": {"type": "unknown", "error": {"code": "auth/no-auth-event"}}}]
    main, popup = open_popup(browser)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
    # The newest account has the focus; Tab reaches "Add new account", Enter opens the form with the focus on Email.
    assert "Old User" in browser.switch_to.active_element.text
    shot(browser, "chooser")
    tab_to(browser, "add-account")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "add-user").is_displayed())
    assert active_id(browser) == "email-input"
    assert browser.find_element(By.ID, "main-form").get_attribute("aria-labelledby") == "add-user-title"
    for field in ("email-input", "display-name-input", "screen-name-input", "profile-photo-input"):  # each has its label
        assert browser.find_element(By.CSS_SELECTOR, f'label[for="{field}"]').text
    # Checked as the official page checks: required, then an "@".
    email = browser.switch_to.active_element
    email.send_keys(Keys.ENTER)
    assert browser.find_element(By.ID, "email-error").text == "Email required"
    assert email.get_attribute("aria-invalid") == "true" and active_id(browser) == "email-input"
    email.send_keys("ada")
    email.send_keys(Keys.ENTER)
    assert browser.find_element(By.ID, "email-error").text == 'Missing "@"'
    email.send_keys(".lovelace@example.com")
    assert browser.find_element(By.ID, "email-error").text == ""
    for field, value in (("display-name-input", "Ada Lovelace"), ("screen-name-input", "ada_l"), ("profile-photo-input", "https://example.com/ada.png")):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        assert active_id(browser) == field
        browser.switch_to.active_element.send_keys(value)
    shot(browser, "new-account")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(browser, WAIT).until(lambda d: "Signed in" in d.find_element(By.ID, "status").text)
    assert csp_problems(browser) == []
    browser.close()
    browser.switch_to.window(main)
    WebDriverWait(browser, WAIT).until(lambda d: len(auth_events(d)) == 2)
    event = auth_events(browser)[1]["authEvent"]
    # The official page's AuthEvent, key for key.
    assert list(event) == ["type", "eventId", "urlResponse", "sessionId", "postBody", "tenantId", "error"]
    assert {k: v for k, v in event.items() if k != "urlResponse"} == {
        "type": "signInViaPopup", "eventId": "55501", "sessionId": "ValueNotUsedByAuthEmulator", "postBody": "", "tenantId": None, "error": None}
    claims, _ = check_url_response(emu, event)
    assert list(claims) == ["sub", "iss", "aud", "exp", "iat", "name", "screen_name", "email", "email_verified", "picture"]
    assert re.fullmatch(r"[0-9]{40}", claims["sub"]), claims["sub"]
    assert {k: v for k, v in claims.items() if k != "sub"} == {
        "iss": "", "aud": "", "exp": 0, "iat": 0, "name": "Ada Lovelace", "screen_name": "ada_l", "email": "ada.lovelace@example.com",
        "email_verified": True, "picture": "https://example.com/ada.png"}
    assert csp_problems(browser) == []


def test_popup_chooses_a_listed_account_shown_as_text(browser, emu, pages):
    hostile = '<img src=x onerror="window.pwned=1"> Mallory'
    link_provider(emu, "kb-hostile", {"providerId": "apple.com", "rawId": "apple-1", "email": "m@example.com", "displayName": hostile,
                                      "photoUrl": "javascript:window.pwned=2"})
    browser.get(app_page(pages, emu, "/popup-apple.html", "linkViaPopup", provider="apple.com", event_id="777", tid=None))
    wait_ready(browser)
    main, popup = open_popup(browser)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
    first = browser.switch_to.active_element
    assert first.find_element(By.CSS_SELECTOR, ".primary").text == hostile   # text, not markup
    assert browser.find_elements(By.CSS_SELECTOR, "#accounts img") == []      # no photo from a javascript: URL
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in with Apple.com"
    first.send_keys(Keys.ENTER)
    WebDriverWait(browser, WAIT).until(lambda d: "Signed in" in d.find_element(By.ID, "status").text)
    browser.close()
    browser.switch_to.window(main)
    WebDriverWait(browser, WAIT).until(lambda d: len(auth_events(d)) == 2)
    event = auth_events(browser)[1]["authEvent"]
    assert event["type"] == "linkViaPopup" and event["eventId"] == "777"
    claims, _ = check_url_response(emu, event, "apple.com")
    # Exactly the official page's claims for a listed account (its key order; no screen_name: there is none).
    assert js_json(claims) == js_json({"sub": "apple-1", "iss": "", "aud": "", "exp": 0, "iat": 0, "name": hostile, "email": "m@example.com",
                                       "email_verified": True, "picture": "javascript:window.pwned=2"})


def test_redirect_leaves_the_event_for_the_iframe_and_returns(browser, emu, pages, google):
    link_provider(emu, "redir-user", {"providerId": "github.com", "rawId": "gh-42", "email": "octo@example.com", "displayName": "Octo Cat"})
    link_provider(emu, "redir-tenant", {"providerId": "github.com", "rawId": "gh-t", "email": "t@example.com"}, tenant="team-x")
    url = app_page(pages, emu, "/redirect.html", "signInViaRedirect", provider="github.com", event_id="888", tid="team-x")
    browser.get(url)
    wait_ready(browser)
    browser.find_element(By.ID, "go").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
    # The tenant's account only (tid), chosen with Enter.
    assert [b.text.splitlines()[-1] for b in browser.find_elements(By.CSS_SELECTOR, "#accounts button.account")] == ["t@example.com"]
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    # Back on the app page (the redirect URL), whose iframe found the event and handed it over.
    WebDriverWait(browser, WAIT).until(lambda d: d.current_url == url and d.execute_script("return window.ready === true"))
    WebDriverWait(browser, WAIT).until(lambda d: auth_events(d) and auth_events(d)[-1]["authEvent"].get("type") != "unknown")
    event = auth_events(browser)[-1]["authEvent"]
    assert {k: v for k, v in event.items() if k != "urlResponse"} == {
        "type": "signInViaRedirect", "eventId": "888", "sessionId": "ValueNotUsedByAuthEmulator", "postBody": "", "tenantId": "team-x", "error": None}
    claims, _ = check_url_response(emu, event, "github.com")
    assert claims == {"sub": "gh-t", "iss": "", "aud": "", "exp": 0, "iat": 0, "email": "t@example.com", "email_verified": True}
    # Handed over once: the iframe removed it.
    browser.switch_to.frame(browser.find_element(By.CSS_SELECTOR, "iframe"))
    assert browser.execute_script("return sessionStorage.getItem(arguments[0])", STORAGE_KEY) is None
    browser.switch_to.default_content()

    # Without gapi the event waits in the emulator origin's sessionStorage under the SDK's key.
    d = make_browser(1)
    try:
        url = app_page(pages, emu, "/redirect-nogapi.html", "signInViaRedirect", provider="github.com", event_id="999", nogapi=True)
        d.get(url)
        wait_ready(d)
        d.find_element(By.ID, "go").click()
        WebDriverWait(d, WAIT).until(lambda x: x.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
        d.switch_to.active_element.send_keys(Keys.ENTER)
        WebDriverWait(d, WAIT).until(lambda x: x.current_url == url and x.execute_script("return window.ready === true"))
        d.switch_to.frame(d.find_element(By.CSS_SELECTOR, "iframe"))
        stored = json.loads(d.execute_script("return sessionStorage.getItem(arguments[0])", STORAGE_KEY))
        assert stored["type"] == "signInViaRedirect" and stored["eventId"] == "999" and stored["tenantId"] is None
        assert check_url_response(emu, stored, "github.com")[0]["sub"] == "gh-42"
    finally:
        d.quit()


def requested_navigations(driver):
    """The URLs the page asked to navigate to since the last call (an app link leaves no trace but this)."""
    urls = []
    for entry in driver.get_log("performance"):
        m = json.loads(entry["message"])["message"]
        if m["method"] == "Page.frameRequestedNavigation":
            urls.append(m["params"]["url"])
    return urls


def test_mobile_flows_leave_by_intent_and_deep_link(browser, emu):
    """Android (apn) and iOS (ibi with clientId, appId or neither) get the links their SDKs expect."""
    link_provider(emu, "mobile-user", {"providerId": "twitter.com", "rawId": "tw-1", "screenName": "tweety", "email": "tw@example.com"})
    base = f"{emu.url}/emulator/auth/handler?apiKey={KEY}&authType=signInViaRedirect&eventId=e1&providerId=twitter.com&v=12.14.0"
    expected_claims = js_json({"sub": "tw-1", "iss": "", "aud": "", "exp": 0, "iat": 0, "screen_name": "tweety", "email": "tw@example.com",
                               "email_verified": True})
    url_response = f"{emu.url}/emulator/auth/handler?providerId=twitter.com&id_token={encode_uri_component(expected_claims)}"
    callback = encode_uri_component(f"{emu.url}/__/auth/callback?authType=signInViaRedirect&link={encode_uri_component(url_response)}&eventId=e1")
    android = base + "&apn=com.example.app"
    cases = {
        android: ("intent://firebase.auth/#Intent;scheme=genericidp;package=com.example.app;S.authType=signInViaRedirect;S.eventId=e1;"
                  f"S.link={encode_uri_component(url_response)};B.encryptionEnabled=false;"
                  f"S.browser_fallback_url={encode_uri_component(android + '&error=App+not+found+for+intent')};end;"),
        base + "&ibi=com.example.ios&clientId=123-abc.apps.googleusercontent.com":
            f"com.googleusercontent.apps.123-abc://firebaseauth/link?deep_link_id={callback}",
        base + "&ibi=com.example.ios&appId=1:123:ios:abc": f"app-1-123-ios-abc://firebaseauth/link?deep_link_id={callback}",
        base + "&ibi=com.example.ios": f"com.example.ios://google/link?deep_link_id={callback}",
    }
    main = browser.current_window_handle
    for page, link in cases.items():
        # A tab each: after a link to an app Chromium has no handler for, its tab takes no more key presses.
        browser.switch_to.new_window("tab")
        try:
            browser.get(page)
            WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
            requested_navigations(browser)
            browser.switch_to.active_element.send_keys(Keys.ENTER)
            WebDriverWait(browser, WAIT).until(lambda d: "Signed in" in d.find_element(By.ID, "status").text)
            assert WebDriverWait(browser, WAIT).until(requested_navigations) == [link], page
        finally:
            browser.close()
            browser.switch_to.window(main)
    # An app id that could change the link's meaning is refused.
    browser.get(base + "&apn=com.example;S.evil=1")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "fatal").is_displayed())
    assert "invalid apn" in browser.find_element(By.ID, "fatal").text


def test_the_page_refuses_what_it_cannot_finish(browser, emu):
    # No app named: the official page's message.
    browser.get(f"{emu.url}/emulator/auth/handler?apiKey={KEY}&providerId=google.com&authType=signInViaPopup")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "fatal").is_displayed())
    assert "Missing one of appName / clientId / appId / apn / ibi" in browser.find_element(By.ID, "fatal").text
    assert not browser.find_element(By.ID, "accounts-list").is_displayed()
    # A popup whose opener has no helper iframe.
    browser.get(f"{emu.url}/emulator/auth/handler?apiKey={KEY}&appName=x&providerId=google.com&authType=signInViaPopup")
    browser.find_element(By.ID, "add-account").send_keys(Keys.ENTER)
    browser.find_element(By.ID, "autogen-button").click()
    email = browser.find_element(By.ID, "email-input").get_attribute("value")
    assert re.fullmatch(r"[a-z]+\.[a-z]+\.[0-9]{1,3}@example\.com", email), email
    first, last = email.split("@")[0].split(".")[:2]
    assert browser.find_element(By.ID, "display-name-input").get_attribute("value") == f"{first.capitalize()} {last.capitalize()}"
    assert browser.find_element(By.ID, "screen-name-input").get_attribute("value") == f"{last}_{first}"
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "fatal").is_displayed())
    assert "No matching frame" in browser.find_element(By.ID, "fatal").text
    # A redirect to a script URL is refused (the CSP would block it too).
    browser.get(f"{emu.url}/emulator/auth/handler?apiKey={KEY}&appName=x&providerId=google.com&authType=signInViaRedirect"
                "&redirectUrl=javascript:alert(1)")
    browser.find_element(By.ID, "add-account").send_keys(Keys.ENTER)
    browser.find_element(By.ID, "email-input").send_keys("x@example.com", Keys.ENTER)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "fatal").is_displayed())
    assert "javascript:" in browser.find_element(By.ID, "fatal").text
    # The error the Android fallback URL carries is shown as the page's message.
    browser.get(f"{emu.url}/emulator/auth/handler?apiKey={KEY}&appName=x&providerId=google.com&authType=signInViaRedirect"
                "&error=App+not+found+for+intent")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "fatal").is_displayed())
    assert browser.find_element(By.ID, "fatal").text == "App not found for intent"


def test_the_chooser_fits_a_phone_screen(google, emu):
    d = make_browser(google.port)
    try:
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 375, "height": 740, "deviceScaleFactor": 2, "mobile": True})
        d.get(f"{emu.url}/emulator/auth/handler?apiKey={KEY}&appName=x&providerId=google.com&authType=signInViaRedirect&redirectUrl=http://127.0.0.1/")
        WebDriverWait(d, WAIT).until(lambda x: x.find_elements(By.CSS_SELECTOR, "#accounts button.account"))
        assert d.execute_script("return document.documentElement.scrollWidth") <= 375
        shot(d, "chooser-375px")
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        d.find_element(By.ID, "add-account").send_keys(Keys.ENTER)
        shot(d, "new-account-dark")
        assert csp_problems(d) == []
    finally:
        d.quit()


# -- the real JS SDK (FIREBASE_SDK_DIR) -----------------------------------------------------------------------------


SDK_PAGE = """<!doctype html><html><head><meta charset="utf-8"><script type="importmap">{"imports": %(imports)s}</script></head>
<body><button id="go" disabled>Sign in</button><pre id="out">running</pre>
<script type="module">
import { initializeApp } from "@firebase/app";
import { initializeAuth, browserSessionPersistence, browserPopupRedirectResolver, connectAuthEmulator, GoogleAuthProvider,
         signInWithPopup, signInWithRedirect, getRedirectResult } from "@firebase/auth";
const auth = initializeAuth(initializeApp({ apiKey: %(key)s, projectId: "demo-phone", authDomain: "demo-phone.firebaseapp.com" }),
                            { persistence: browserSessionPersistence, popupRedirectResolver: browserPopupRedirectResolver });
connectAuthEmulator(auth, %(emu)s, { disableWarnings: true });
const out = (o) => { document.getElementById("out").textContent = JSON.stringify(o); };
function describe(r) { return { uid: r.user.uid, providers: r.user.providerData.map((p) => [p.providerId, p.uid, p.email]), op: r.operationType }; }
const mode = new URLSearchParams(location.search).get("mode");
if (mode === "redirect") {
  getRedirectResult(auth).then((r) => out(r ? describe(r) : { none: true }), (e) => out({ error: e.code || String(e) }));
}
const go = document.getElementById("go");
go.disabled = false;
go.addEventListener("click", () => {
  const provider = new GoogleAuthProvider();
  if (mode === "redirect") signInWithRedirect(auth, provider).catch((e) => out({ error: e.code || String(e) }));
  else signInWithPopup(auth, provider).then((r) => out(describe(r)), (e) => out({ error: e.code || String(e) }));
});
</script></body></html>"""


def signinwithidp_posts(driver):
    """The bodies of the requests the page sent to accounts:signInWithIdp (from the performance log)."""
    bodies = []
    for entry in driver.get_log("performance"):
        m = json.loads(entry["message"])["message"]
        if m["method"] == "Network.requestWillBeSent" and "accounts:signInWithIdp" in m["params"]["request"]["url"] \
                and m["params"]["request"]["method"] == "POST":
            req = m["params"]["request"]
            data = req.get("postData")
            if data is None:
                data = driver.execute_cdp_cmd("Network.getRequestPostData", {"requestId": m["params"]["requestId"]})["postData"]
            bodies.append(json.loads(data))
    return bodies


def has_sign_in_with_idp(emu):
    return emu.itk("signInWithIdp", {}).status_code != 404


def new_account_by_keyboard(driver, email):
    WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.ID, "add-account"))
    tab_to(driver, "add-account")
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(driver, WAIT).until(lambda d: active_id(d) == "email-input")
    driver.switch_to.active_element.send_keys(email, Keys.TAB, "SDK User", Keys.ENTER)


def new_account_on_the_official_page(driver, email):
    WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".js-new-account button"))
    driver.find_element(By.CSS_SELECTOR, ".js-new-account button").click()
    driver.find_element(By.ID, "email-input").send_keys(email)
    driver.find_element(By.ID, "display-name-input").send_keys("SDK User")
    driver.find_element(By.ID, "sign-in").click()


def sdk_flow(google, pages, emulator_url, mode, add_account):
    """signInWithPopup / signInWithRedirect of the real SDK through `emulator_url`'s provider page, a new account added
    by `add_account`: what the app got, and the bodies the SDK posted to signInWithIdp."""
    d = make_browser(google.port)
    try:
        d.execute_cdp_cmd("Network.enable", {})
        url = pages.add(f"/sdk-{mode}.html", SDK_PAGE % {"imports": json.dumps(SDK_IMPORTS), "emu": json.dumps(emulator_url), "key": json.dumps(KEY)})
        d.get(url + f"?mode={mode}")
        WebDriverWait(d, 30).until(lambda x: x.find_element(By.ID, "go").is_enabled())
        if mode == "redirect":
            WebDriverWait(d, 30).until(lambda x: x.find_element(By.ID, "out").text != "running")
            assert json.loads(d.find_element(By.ID, "out").text) == {"none": True}
        email = f"sdk-{mode}@example.com"
        if mode == "popup":
            main, _ = open_popup(d)
            add_account(d, email)
            d.switch_to.window(main)
        else:
            d.find_element(By.ID, "go").click()
            add_account(d, email)
            WebDriverWait(d, 30).until(lambda x: x.current_url.startswith(url))
        WebDriverWait(d, 30).until(lambda x: x.find_element(By.ID, "out").text not in ("running", '{"none":true}'))
        return json.loads(d.find_element(By.ID, "out").text), signinwithidp_posts(d)
    finally:
        d.quit()


@pytest.mark.skipif(not SDK, reason="needs FIREBASE_SDK_DIR (the Firebase JS SDK's node_modules)")
@pytest.mark.parametrize("mode", ["popup", "redirect"])
def test_the_real_sdk_signs_in_through_the_page(google, emu, pages, mode):
    result, posts = sdk_flow(google, pages, emu.url, mode, new_account_by_keyboard)
    assert len(posts) == 1, (posts, result)
    body = posts[0]
    # What the SDK sends for a popup/redirect credential: the page's urlResponse as requestUri, its sessionId.
    assert list(body) == ["requestUri", "sessionId", "returnSecureToken", "returnIdpCredential"], body
    assert body["sessionId"] == "ValueNotUsedByAuthEmulator" and body["returnSecureToken"] is True and body["returnIdpCredential"] is True
    claims, _ = check_url_response(emu, {"urlResponse": body["requestUri"]})
    assert list(claims) == ["sub", "iss", "aud", "exp", "iat", "name", "email", "email_verified"]
    assert claims["email"] == f"sdk-{mode}@example.com" and claims["name"] == "SDK User" and claims["email_verified"] is True
    if has_sign_in_with_idp(emu):
        assert result.get("providers") == [["google.com", claims["sub"], claims["email"]]], result
    else:  # this build has no signInWithIdp yet: the SDK got its 404
        assert result == {"error": "auth/not-found"}, result


OFFICIAL = os.environ.get("OFFICIAL_AUTH_EMULATOR_URL")  # e.g. http://127.0.0.1:9399 (firebase-tools' Auth emulator)


@pytest.mark.skipif(not SDK or not OFFICIAL, reason="needs FIREBASE_SDK_DIR and OFFICIAL_AUTH_EMULATOR_URL")
@pytest.mark.parametrize("mode", ["popup", "redirect"])
def test_the_sdk_posts_what_the_official_page_makes_it_post(google, emu, pages, mode):
    """The differential check: the same SDK flow through the official emulator's page and ours posts the same request
    (but for the emulator's address and the new account's random subject)."""
    ours = sdk_flow(google, pages, emu.url, mode, new_account_by_keyboard)[1]
    result, official = sdk_flow(google, pages, OFFICIAL, mode, new_account_on_the_official_page)
    assert result.get("providers"), result   # the official emulator signed the account in

    def normalized(body, url):
        b = dict(body)
        b["requestUri"] = re.sub(r"%22sub%22%3A%22[0-9]{40}%22", "SUB", b["requestUri"].replace(url, "EMULATOR"))
        return b
    assert [normalized(b, emu.url) for b in ours] == [normalized(b, OFFICIAL) for b in official]
