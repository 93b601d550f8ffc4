"""The README's console screenshots (docs/console-users.png, docs/console-codes.png), taken from a working day.

Run through scripts/console-screenshots BINARY. Starts BINARY on a free port in a temporary directory (its embedded
config, no PHONE_AUTH_EMULATOR_* from the environment), seeds users and codes through the public APIs only — the
REST requests the client SDKs send, admin calls with `Bearer owner` as firebase-admin sends them, the /emulator/
config API — then drives the console in headless Chromium (1280x800) and stops the server. Names, numbers, emails
and provider subjects are fixed; only uids, sessions, the codes of non-fictional numbers and times vary by run.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

import requests
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PROJECT = "demo-phone"
KEY = {"key": "fake-api-key"}
ADMIN = {"Authorization": "Bearer owner"}
WIDTH, HEIGHT = 1280, 800
WAIT = 10  # seconds a page may take to show what was seeded (waits end as soon as it does)

ADA_PHONE, ADA_CODE = "+16505554567", "123456"        # the shipped fictional number (README's walk-through)
ADA_SECOND_FACTOR, ADA_SECOND_CODE = "+16505550123", "246810"
PENDING_FICTIONAL = {"+16505550142": "424242", "+16505550187": "135790"}
ALAN_PHONE = "+447700900123"                          # Ofcom's drama range: an ordinary number, a random code
PENDING_ORDINARY = "+447700900461"


class Emulator:
    """BINARY on a free port, in a temporary working directory."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="console-shots-")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PHONE_AUTH_EMULATOR_") and k != "FIREBASE_AUTH_EMULATOR_HOST"}
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen([binary, "--port", "0"], cwd=self.dir, env=env,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on (http://\S+)", line)
        if not m:
            self.stop()
            sys.exit(f"the server did not start: {line!r}; its log: {self.dir}/server.log")
        self.url = m.group(1)
        self.http = requests.Session()
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.http.get(self.url + "/", timeout=2).json()["authEmulator"]["ready"]:
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                sys.exit(f"the server at {self.url} did not answer")
            time.sleep(0.1)

    def call(self, method, path, body=None, params=None, headers=None):
        r = self.http.request(method, self.url + path, json=body, params=params, headers=headers, timeout=10)
        if r.status_code != 200:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
        return r.json()

    def client(self, op, body, version="v1"):
        """What a client SDK sends: an API key, no credentials of its own."""
        return self.call("POST", f"/identitytoolkit.googleapis.com/{version}/accounts{op}", body, params=KEY)

    def admin(self, op, body):
        """What firebase-admin sends: the project's admin resource with Bearer owner."""
        return self.call("POST", f"/identitytoolkit.googleapis.com/v1/projects/{PROJECT}/accounts{op}", body, headers=ADMIN)

    def emulator(self, method, path, body=None, params=None):
        return self.call(method, f"/emulator/v1/projects/{PROJECT}{path}", body, params=params)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def send_code(emu, phone):
    return emu.client(":sendVerificationCode", {"phoneNumber": phone})["sessionInfo"]


def inbox_code(emu, phone):
    return emu.emulator("GET", "/verificationCodes", params={"phoneNumber": phone})["verificationCodes"][-1]["code"]


def phone_sign_in(emu, phone, code=None):
    session = send_code(emu, phone)
    return emu.client(":signInWithPhoneNumber", {"sessionInfo": session, "code": code or inbox_code(emu, phone)})


def sign_in_with_idp(emu, provider, claims, id_token=None):
    """signInWithCredential(Provider.credential(idToken)): the emulator's convention, an id_token of JSON claims."""
    body = {"requestUri": "http://localhost", "returnSecureToken": True,
            "postBody": urllib.parse.urlencode({"id_token": json.dumps(claims), "providerId": provider})}
    if id_token:
        body["idToken"] = id_token  # linkWithCredential
    return emu.client(":signInWithIdp", body)


def seed(emu):
    """A working day: four users of different kinds, codes used and pending. Returns Ada's uid."""
    # Half past nine on the emulator clock (the next one to come), so the times shown read like office hours.
    now = emu.call("GET", "/emulator/v1/clock")["nowMillis"] / 1000
    target = (now // 86400) * 86400 + 9.5 * 3600
    if target < now + 1:
        target += 86400
    emu.call("POST", "/emulator/v1/clock:advance", {"seconds": round(target - now, 3)})

    # Extra fictional numbers, as a project's test numbers (the PATCH replaces the map: keep the shipped one).
    numbers = {ADA_PHONE: ADA_CODE, ADA_SECOND_FACTOR: ADA_SECOND_CODE, **PENDING_FICTIONAL}
    emu.emulator("PATCH", "/config", {"signIn": {"phoneNumber": {"testPhoneNumbers": numbers}}})

    # Ada: signInWithPhoneNumber, linkWithCredential(Google), updateProfile, an SMS second factor, claims by an admin.
    ada = phone_sign_in(emu, ADA_PHONE, ADA_CODE)
    linked = sign_in_with_idp(emu, "google.com", {"sub": "104827361049275610384", "email": "ada@example.com",
                                                  "email_verified": True, "name": "Ada Lovelace"}, ada["idToken"])
    token = emu.client(":update", {"idToken": linked["idToken"], "displayName": "Ada Lovelace",
                                   "returnSecureToken": True})["idToken"]
    start = emu.client("/mfaEnrollment:start", {"idToken": token, "phoneEnrollmentInfo": {"phoneNumber": ADA_SECOND_FACTOR}}, "v2")
    emu.client("/mfaEnrollment:finalize", {"idToken": token, "displayName": "work phone", "phoneVerificationInfo": {
        "sessionInfo": start["phoneSessionInfo"]["sessionInfo"], "code": ADA_SECOND_CODE}}, "v2")
    emu.admin(":update", {"localId": ada["localId"], "customAttributes": json.dumps({"role": "admin", "plan": "pro"})})

    # Grace: createUserWithEmailAndPassword, sendEmailVerification, applyActionCode (the link from the oob inbox).
    grace = emu.client(":signUp", {"email": "grace@example.com", "password": "cobol-1959", "displayName": "Grace Hopper",
                                   "returnSecureToken": True})
    emu.client(":sendOobCode", {"requestType": "VERIFY_EMAIL", "idToken": grace["idToken"]})
    oob = emu.emulator("GET", "/oobCodes", params={"email": "grace@example.com"})["oobCodes"][-1]["oobCode"]
    emu.client(":update", {"oobCode": oob})

    # Katherine: signInWithCredential(GitHub).
    sign_in_with_idp(emu, "github.com", {"sub": "5871202", "email": "katherine@example.com", "email_verified": True,
                                         "name": "Katherine Johnson"})

    # Alan: an ordinary number; the code is read from the inbox, as a test would.
    alan = phone_sign_in(emu, ALAN_PHONE)
    emu.client(":update", {"idToken": alan["idToken"], "displayName": "Alan Turing"})

    # Codes still waiting: two fictional numbers and an ordinary one, sent and not yet used.
    for phone in [*PENDING_FICTIONAL, PENDING_ORDINARY]:
        send_code(emu, phone)
    return ada["localId"]


def browser():
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1", "--lang=en-US"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    # The viewport itself 1280x800, whatever the window's decorations take.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    return driver


def settle(driver):
    """No toast, no focus ring, no caret: the page as it rests."""
    WebDriverWait(driver, WAIT).until(lambda d: not d.find_element(By.ID, "toast").text)
    driver.execute_script("document.activeElement && document.activeElement.blur()")
    time.sleep(0.3)


def click(driver, css):
    """Clicks, finding the element again when a live update re-rendered it in between."""
    def attempt(d):
        try:
            d.find_element(By.CSS_SELECTOR, css).click()
            return True
        except (StaleElementReferenceException, NoSuchElementException):
            return False
    WebDriverWait(driver, WAIT).until(attempt)


def shoot(driver, name):
    path = os.path.join(DOCS, f"console-{name}.png")
    driver.save_screenshot(path)
    print("wrote", os.path.relpath(path, ROOT))


def users_view(driver, emu, uid):
    driver.get(f"{emu.url}/#users")
    WebDriverWait(driver, WAIT).until(lambda d: "4 of 4 users match" in d.find_element(By.ID, "users-summary").text)
    click(driver, f'#users-table tr[data-uid="{uid}"] button')
    WebDriverWait(driver, WAIT).until(lambda d: d.find_element(By.ID, "user-uid").text == uid
                                      and '"plan"' in d.find_element(By.ID, "claims").get_property("value")
                                      and d.find_elements(By.CSS_SELECTOR, '#user-providers li[data-provider="google.com"]'))
    settle(driver)
    # The details from their heading down (they sit below the list and the test-provider form); 800 px hold all
    # but the card's lower edge.
    driver.execute_script("const r = document.getElementById('user-detail').getBoundingClientRect();"
                          "window.scrollTo(0, window.scrollY + r.top - 4);")
    time.sleep(0.2)
    shoot(driver, "users")


def codes_view(driver, emu):
    driver.get(f"{emu.url}/#codes")
    want = len(PENDING_FICTIONAL) + 1
    WebDriverWait(driver, WAIT).until(
        lambda d: "Connecting" not in d.find_element(By.ID, "live").text
        and len(d.find_elements(By.CSS_SELECTOR, '#codes-table tr[data-state="pending"]')) == want)
    settle(driver)
    shoot(driver, "codes")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/console-screenshots BINARY")
    emu = Emulator(os.path.abspath(sys.argv[1]))
    driver = None
    try:
        uid = seed(emu)
        driver = browser()
        users_view(driver, emu, uid)
        codes_view(driver, emu)
    finally:
        if driver:
            driver.quit()
        emu.stop()


if __name__ == "__main__":
    main()
