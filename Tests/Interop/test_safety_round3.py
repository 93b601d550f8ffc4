"""The third outside attack (issue 23), finding by finding, as raw HTTP against the release binary (and a foreign web
page in headless Chromium for the cross-site ones). Each test reproduces the attack as it was reported and checks it
no longer works: they fail on the binary before the fix.

1. A second factor passed with a password and the public preset code of a fictional number with the same mask.
2. Masked (iOS testing-mode) sends outside every send policy.
3. Unbounded guessing: pending MFA sign-ins, first-factor codes, passwords; createAuthUri telling who is registered.
4. A blind cross-site GET (`oobCodes:wait`) creating projects until --max-projects.
5. Unbounded pending sessions; queued blocking-function calls whose deadline started late.
6. Custom and session claims replacing identity claims in signed tokens.
"""
import concurrent.futures
import http.server
import json
import socketserver
import threading

import pytest
import requests

from conftest import FICTIONAL, HAVE_BROWSER, claims_of, error_message, headless_chromium

OWNER = {"Authorization": "Bearer owner"}
REAL = "+15551234567"   # the victim's real second factor: same masked form as the shipped fictional +16505554567
MASK = "+*******4567"
V2 = "/identitytoolkit.googleapis.com/v2/accounts/"
EVIL = "https://evil.example"


def admin_create(emu, uid, phone, headers=OWNER):
    r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", headers=headers,
                         json={"localId": uid, "email": f"{uid}@example.com", "emailVerified": True, "password": "secret12",
                               "mfaInfo": [{"phoneInfo": phone}]})
    assert r.status_code == 200, r.text


def password_sign_in(emu, uid, headers=None):
    r = emu.itk("signInWithPassword", {"email": f"{uid}@example.com", "password": "secret12", "returnSecureToken": True},
                headers=headers)
    assert r.status_code == 200, r.text
    body = r.json()
    return body["mfaPendingCredential"], body["mfaInfo"][0]


def finalize(emu, credential, session, code, headers=None):
    return emu.post(V2 + "mfaSignIn:finalize", {"mfaPendingCredential": credential,
                                                "phoneVerificationInfo": {"sessionInfo": session, "code": code}}, headers=headers)


# 1 ------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("origin", [None, EVIL])
def test_a_public_preset_code_never_passes_another_numbers_second_factor(fresh, origin):
    emu = fresh()
    admin_create(emu, "victim", REAL)
    headers = {"Origin": origin} if origin else None
    credential, hint = password_sign_in(emu, "victim", headers)
    assert hint["phoneInfo"] == MASK
    r = emu.itk("sendVerificationCode", {"phoneNumber": MASK}, headers=headers)
    assert r.status_code == 200, r.text
    session = r.json()["sessionInfo"]
    attack = finalize(emu, credential, session, "123456", headers)
    assert "idToken" not in attack.json(), "the second factor was skipped with a public preset code"
    assert error_message(attack) == "INVALID_CODE"
    # The code really sent is the enrolled number's, in the inbox for that number; it passes.
    codes = emu.session.get(f"{emu.url}/emulator/v1/projects/demo-phone/verificationCodes", params={"phoneNumber": REAL}).json()
    code = next(c["code"] for c in codes["verificationCodes"] if c["sessionInfo"] == session)
    ok = finalize(emu, credential, session, code, headers)
    assert ok.status_code == 200, ok.text
    assert claims_of(ok.json()["idToken"])["firebase"]["sign_in_second_factor"] == "phone"


def test_every_mask_collision_and_the_plain_paths_need_the_enrolled_numbers_code(fresh):
    emu = fresh()
    # Several fictional numbers with the victim's masked form, and another user enrolled on one of them.
    patch = emu.session.patch(f"{emu.url}/emulator/v1/projects/demo-phone/config", json={"signIn": {"phoneNumber": {
        "testPhoneNumbers": {FICTIONAL: "123456", "+17775554567": "111111", "+18885554567": "222222"}}}})
    assert patch.status_code == 200, patch.text
    admin_create(emu, "victim", REAL)
    admin_create(emu, "other", "+17775554567")
    v_cred, v_hint = password_sign_in(emu, "victim")
    o_cred, _ = password_sign_in(emu, "other")
    # The masked send stands for the newest pending sign-in (other's, whose factor is fictional): only other's own preset
    # code passes it, and only with other's pending credential.
    for preset in ("123456", "222222", "111111"):
        session = emu.send(MASK)
        assert "idToken" not in finalize(emu, v_cred, session, preset).json(), preset
        r = finalize(emu, o_cred, session, preset)
        assert ("idToken" in r.json()) == (preset == "111111"), (preset, r.text)
    # Now the victim's pending sign-in is the newest of that mask: no preset code passes it.
    for preset in ("123456", "111111", "222222"):
        session = emu.send(MASK)
        assert "idToken" not in finalize(emu, v_cred, session, preset).json(), preset
    # mfaSignIn:start for the victim: a random code, never a preset one; a first-factor session is not a second factor.
    start = emu.post(V2 + "mfaSignIn:start", {"mfaPendingCredential": v_cred, "mfaEnrollmentId": v_hint["mfaEnrollmentId"]})
    session = start.json()["phoneResponseInfo"]["sessionInfo"]
    for preset in ("123456", "111111", "222222"):
        assert "idToken" not in finalize(emu, v_cred, session, preset).json()
    first_factor = emu.send(REAL)
    assert "idToken" not in finalize(emu, v_cred, first_factor, emu.code_for(REAL)).json()


# 2 ------------------------------------------------------------------------------------------------------------------

class RefuseAll(http.server.BaseHTTPRequestHandler):
    calls = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        RefuseAll.calls.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        data = json.dumps({"error": {"message": "no SMS", "status": "PERMISSION_DENIED"}}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_masked_send_goes_through_every_send_policy(fresh):
    emu = fresh()
    admin_create(emu, "victim", REAL)
    password_sign_in(emu, "victim")
    cfg = f"{emu.url}/emulator/v1/projects/demo-phone/config"
    # Per-number limit.
    assert emu.session.patch(cfg, json={"phoneAuth": {"sendRateLimits": {"perPhoneNumber": {"max": 1}}}}).status_code == 200
    assert emu.itk("sendVerificationCode", {"phoneNumber": MASK}).status_code == 200
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": MASK})) == "TOO_MANY_ATTEMPTS_TRY_LATER"
    assert emu.session.patch(cfg, json={"phoneAuth": {"sendRateLimits": {"perPhoneNumber": {"max": 0}}}}).status_code == 200
    # Region allowlist (the enrolled number is American).
    assert emu.session.patch(cfg, json={"smsRegionConfig": {"allowlistOnly": {"allowedRegions": ["GB"]}}}).status_code == 200
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": MASK})).startswith("OPERATION_NOT_ALLOWED")
    assert emu.session.patch(cfg, json={"smsRegionConfig": {"allowByDefault": {"disallowedRegions": []}}}).status_code == 200
    # Scenario numbers.
    assert emu.session.patch(cfg, json={"phoneAuth": {"scenarioNumbers": {REAL: {"onSend": "QUOTA_EXCEEDED"}}}}).status_code == 200
    assert error_message(emu.itk("sendVerificationCode", {"phoneNumber": MASK})) == "QUOTA_EXCEEDED"
    assert emu.session.patch(cfg, json={"phoneAuth": {"scenarioNumbers": {}}}).status_code == 200
    # A beforeSendSms that refuses everything.
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), RefuseAll)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        RefuseAll.calls = []
        r = emu.session.patch(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", params={"updateMask": "blockingFunctions"},
                              headers=OWNER, json={"blockingFunctions": {"triggers": {"beforeSendSms": {"functionUri": f"http://127.0.0.1:{server.server_address[1]}/sms"}}}})
        assert r.status_code == 200, r.text
        ok = 0
        for _ in range(20):
            if emu.itk("sendVerificationCode", {"phoneNumber": MASK}).status_code == 200:
                ok += 1
        assert ok == 0, f"{ok} of 20 masked sends got a session past a beforeSendSms that refuses everything"
        assert len(RefuseAll.calls) == 20
    finally:
        server.shutdown()
        server.server_close()


# 3 ------------------------------------------------------------------------------------------------------------------

TOKEN = "a-long-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def test_guessing_is_bounded_on_a_server_others_can_reach(fresh):
    # --admin-token marks the server as reachable by others: protection.mode AUTO turns the limits on.
    emu = fresh("--admin-token", TOKEN)
    admin_create(emu, "victim", REAL, headers=ADMIN)
    credential, hint = password_sign_in(emu, "victim")
    starts = [emu.post(V2 + "mfaSignIn:start", {"mfaPendingCredential": credential, "mfaEnrollmentId": hint["mfaEnrollmentId"]})
              for _ in range(8)]
    assert [r.status_code for r in starts[:5]] == [200] * 5
    assert error_message(starts[5]) == "TOO_MANY_ATTEMPTS_TRY_LATER", "one pending credential starts unlimited sessions"
    sessions = [r.json()["phoneResponseInfo"]["sessionInfo"] for r in starts[:5]]
    answers = [error_message(finalize(emu, credential, sessions[i % 5], f"{i:06d}")) for i in range(30)]
    assert "TOO_MANY_ATTEMPTS_TRY_LATER" in answers, answers
    assert answers.count("INVALID_CODE") <= 10, answers
    # Passwords: locked after ten wrong ones, the right one included.
    for _ in range(10):
        assert error_message(emu.itk("signInWithPassword", {"email": "victim@example.com", "password": "guess-guess"})) == "INVALID_LOGIN_CREDENTIALS"
    locked = emu.itk("signInWithPassword", {"email": "victim@example.com", "password": "secret12"})
    assert locked.status_code == 400 and error_message(locked).startswith("TOO_MANY_ATTEMPTS_TRY_LATER"), locked.text
    # First-factor codes for one number.
    r = emu.session.patch(f"{emu.url}/emulator/v1/projects/demo-phone/config", headers=ADMIN, json={"phoneAuth": {"maxCodeAttempts": 0}})
    assert r.status_code == 200, r.text
    session = emu.send("+15550009999")
    guesses = [error_message(emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": f"{i:06d}"})) for i in range(40)]
    assert guesses.count("INVALID_CODE") <= 30 and guesses[-1] == "TOO_MANY_ATTEMPTS_TRY_LATER", guesses


def test_a_loopback_suite_is_not_held_back(fresh):
    emu = fresh()
    assert emu.itk("signUp", {"email": "suite@example.com", "password": "secret12"}).status_code == 200
    for _ in range(30):
        assert error_message(emu.itk("signInWithPassword", {"email": "suite@example.com", "password": "wrong-one"})) == "INVALID_LOGIN_CREDENTIALS"
    assert emu.itk("signInWithPassword", {"email": "suite@example.com", "password": "secret12"}).status_code == 200


@pytest.mark.parametrize("origin", [None, EVIL])
def test_create_auth_uri_does_not_tell_who_is_registered(fresh, origin):
    emu = fresh()
    assert emu.itk("signUp", {"email": "known@example.com", "password": "secret12"}).status_code == 200
    headers = {"Origin": origin} if origin else None
    known = emu.itk("createAuthUri", {"identifier": "known@example.com", "continueUri": "http://localhost"}, headers=headers).json()
    unknown = emu.itk("createAuthUri", {"identifier": "nobody@example.com", "continueUri": "http://localhost"}, headers=headers).json()
    for body in (known, unknown):
        assert set(body) == {"kind", "sessionId"}, body


# 4 ------------------------------------------------------------------------------------------------------------------

def test_blind_oob_waits_create_no_projects(fresh):
    emu = fresh("--max-projects", "3")
    for i in range(20):
        r = requests.get(f"{emu.url}/emulator/v1/projects/blind-{i}/oobCodes:wait", params={"email": "a@example.com", "timeoutSeconds": "0"})
        assert r.status_code == 404, r.text
    # Room is left for projects a client really uses.
    for p in ("used-1", "used-2"):
        r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/{p}/accounts", headers=OWNER, json={"localId": "u1"})
        assert r.status_code == 200, r.text


# 5 ------------------------------------------------------------------------------------------------------------------

def test_pending_sessions_are_bounded(fresh):
    emu = fresh("--max-sessions", "50")
    answers = [emu.itk("sendVerificationCode", {"phoneNumber": f"+1555100{i:04d}"}) for i in range(60)]
    assert [r.status_code for r in answers[:50]] == [200] * 50
    assert all(error_message(r).startswith("QUOTA_EXCEEDED") for r in answers[50:]), answers[50].text
    # Expired sessions give the room back.
    assert emu.session.post(f"{emu.url}/emulator/v1/clock:advance", json={"seconds": 601}).status_code == 200
    assert emu.itk("sendVerificationCode", {"phoneNumber": "+15552000000"}).status_code == 200


class Hang(http.server.BaseHTTPRequestHandler):
    calls = 0
    lock = threading.Lock()
    release = threading.Event()

    def log_message(self, *a):
        pass

    def do_POST(self):
        with Hang.lock:
            Hang.calls += 1
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Hang.release.wait(20)
        try:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        except OSError:
            pass


def test_a_hanging_function_answers_every_queued_flow_with_its_deadline(fresh):
    """With every function thread busy, queued flows are answered DEADLINE_EXCEEDED (or UNAVAILABLE past the queue
    bound), never left waiting. That a queued flow's deadline counts its time in the queue is checked without timing
    in BlockingFunctionsTests.testAQueuedFlowsFirstCallCountsItsTimeInTheQueue."""
    emu = fresh("--blocking-timeout-ms", "1000")
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Hang)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Hang.calls = 0
    Hang.release.clear()
    try:
        r = emu.session.patch(f"{emu.url}/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", params={"updateMask": "blockingFunctions"},
                              headers=OWNER, json={"blockingFunctions": {"triggers": {"beforeSendSms": {"functionUri": f"http://127.0.0.1:{server.server_address[1]}/hang"}}}})
        assert r.status_code == 200, r.text
        n = 64  # eight pool threads: several rounds of queueing
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda i: requests.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                                            json={"phoneNumber": f"+1555300{i:04d}"}, timeout=60), range(n)))
        assert all(r.status_code != 200 for r in answers)
        assert all("Deadline exceeded" in r.text or "UNAVAILABLE" in r.text for r in answers), {r.text for r in answers}
    finally:
        Hang.release.set()
        server.shutdown()
        server.server_close()


# 6 ------------------------------------------------------------------------------------------------------------------

def test_custom_claims_never_replace_identity_claims(fresh):
    emu = fresh()
    user = emu.sign_in()
    forged = {"email": "admin@evil.example", "email_verified": True, "user_id": "root", "phone_number": "+19999999999", "role": "tester"}
    r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update", headers=OWNER,
                         json={"localId": user["localId"], "customAttributes": json.dumps(forged)})
    assert r.status_code == 200, r.text
    again = emu.sign_in()
    c = claims_of(again["idToken"])
    assert c["user_id"] == user["localId"] and c["sub"] == user["localId"]
    assert c["phone_number"] == FICTIONAL
    assert "email" not in c and "email_verified" not in c
    assert c["role"] == "tester"


# the cross-site ones in a real browser ---------------------------------------------------------------------------------

if HAVE_BROWSER:
    from selenium.webdriver.support.ui import WebDriverWait

PAGE = """<!doctype html><meta charset="utf-8"><pre id="out">running</pre><script>
const E = %(emulator)s;
const post = (path, body) => fetch(E + path + "?key=fake-api-key", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)}).then(r => r.json());
(async () => {
  const out = {};
  try {
    const pw = await post("/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword", {email: "victim@example.com", password: "secret12"});
    const send = await post("/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", {phoneNumber: pw.mfaInfo[0].phoneInfo});
    const fin = await post("/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize",
      {mfaPendingCredential: pw.mfaPendingCredential, phoneVerificationInfo: {sessionInfo: send.sessionInfo, code: "123456"}});
    out.mfa = fin.idToken ? "SIGNED IN" : (fin.error && fin.error.message);
  } catch (e) { out.mfa = "error " + e; }
  // Blind cross-site GETs (no Origin header): images.
  await Promise.all(Array.from({length: 40}, (_, i) => new Promise(done => {
    const img = new Image(); img.onload = img.onerror = done;
    img.src = E + "/emulator/v1/projects/blind-" + i + "/oobCodes:wait?email=a@example.com&timeoutSeconds=0";
  })));
  out.done = true;
  document.getElementById("out").textContent = JSON.stringify(out);
})();
</script>"""


@pytest.mark.skipif(not HAVE_BROWSER, reason="needs chromium, chromium-driver and selenium")
def test_a_foreign_page_neither_skips_the_second_factor_nor_fills_the_projects(fresh):
    emu = fresh("--max-projects", "5")
    admin_create(emu, "victim", REAL)
    page = (PAGE % {"emulator": json.dumps(emu.url)}).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Page)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = headless_chromium("--host-resolver-rules=MAP evil.example 127.0.0.1")
    try:
        driver.get(f"http://evil.example:{server.server_address[1]}/")
        WebDriverWait(driver, 30).until(lambda d: d.find_element("id", "out").text != "running")
        out = json.loads(driver.find_element("id", "out").text)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    assert out["mfa"] == "INVALID_CODE", out
    # Every project slot is still free for real use.
    for i in range(4):
        r = emu.session.post(f"{emu.url}/identitytoolkit.googleapis.com/v1/projects/real-{i}/accounts", headers=OWNER, json={"localId": "u1"})
        assert r.status_code == 200, r.text
