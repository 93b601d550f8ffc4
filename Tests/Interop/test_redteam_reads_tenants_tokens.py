"""Issue 11 follow-up, red team F1, F2, F4, against the release binary.

F1: GETs that name new projects or tenants (what an <img src> can send: no Origin, no CORS) allocate nothing.
F2: a foreign web page creates no tenants; empty tenants left by failing requests do not fill the cap or persist.
F4: with --token-signing none a foreign page cannot present a forged (unsigned) ID token; tokens need `sub`.
"""
import base64
import json
import socket
import threading
import time

import requests

from conftest import error_message

EVIL = "http://evil.example"
ITK = "/identitytoolkit.googleapis.com/v1"
OWNER = {"Authorization": "Bearer owner"}


def blast(port, reqs, depth=100):
    """Pipelines raw requests on one keep-alive connection; returns {status: count}. Bounded by len(reqs)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    sent = got = 0
    buf = b""
    statuses = {}
    while got < len(reqs):
        while sent < len(reqs) and sent - got < depth:
            s.sendall(reqs[sent])
            sent += 1
        chunk = s.recv(1 << 20)
        assert chunk, "server closed the connection"
        buf += chunk
        while True:
            h = buf.find(b"\r\n\r\n")
            if h < 0:
                break
            head = buf[:h]
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if len(buf) < h + 4 + length:
                break
            status = int(head[9:12])
            statuses[status] = statuses.get(status, 0) + 1
            buf = buf[h + 4 + length:]
            got += 1
    s.close()
    return statuses


def get(path):
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def post(path, body, origin=None):
    body = body.encode()
    o = f"Origin: {origin}\r\n" if origin else ""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n{o}Content-Length: {len(body)}\r\n\r\n").encode() + body


def tenants(e):
    r = e.session.get(e.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", params={"pageSize": 1000}, headers=OWNER)
    assert r.status_code == 200, r.text
    return sorted(t["name"].rsplit("/", 1)[1] for t in r.json().get("tenants", []))


def test_image_gets_exhaust_neither_projects_nor_tenants(fresh):
    e = fresh("--max-projects", "5")
    reqs = []
    for i in range(1200):
        reqs.append(get(f"/emulator/v1/projects/img-p{i}/verificationCodes"))
        reqs.append(get(f"/emulator/v1/projects/img-q{i}/pushNotifications"))
        reqs.append(get(f"/emulator/v1/projects/demo-phone/tenants/img-t{i}/verificationCodes"))
        reqs.append(get(f"/emulator/v1/projects/demo-phone/tenants/img-u{i}/verificationCodes:wait?phoneNumber=%2B15550001111&timeoutSeconds=0"))
    statuses = blast(e.port, reqs)
    assert statuses == {200: 3600, 404: 1200}, statuses  # :wait with no code answers 404 NOT_FOUND at once
    assert tenants(e) == []
    r = e.session.get(e.url + "/emulator/v1/projects/img-p7/verificationCodes")
    assert r.json() == {"verificationCodes": []}
    # The legitimate clients are not locked out.
    r = e.session.post(e.url + f"{ITK}/projects/my-app-test/accounts", json={}, headers=OWNER)
    assert r.status_code == 200, r.text
    r = e.itk("signUp", {"tenantId": "tenant-abc12"})
    assert r.status_code == 200, r.text
    assert tenants(e) == ["tenant-abc12"]


def test_a_wait_on_a_new_tenant_is_answered_by_its_first_code(fresh):
    e = fresh()
    out = {}

    def wait():
        out["r"] = requests.get(e.url + "/emulator/v1/projects/demo-phone/tenants/later-t/verificationCodes:wait",
                                params={"phoneNumber": "+15550001111", "timeoutSeconds": "60"}, timeout=90)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.5)  # lets the poll register (not a timing assertion: the send below answers it either way)
    assert tenants(e) == [], "waiting created no tenant"
    e.send("+15550001111", tenantId="later-t")
    t.join(90)
    assert out["r"].status_code == 200, out["r"].text
    assert out["r"].json()["phoneNumber"] == "+15550001111"
    assert out["r"].json()["code"] == e.code_for("+15550001111", project="demo-phone/tenants/later-t")
    assert tenants(e) == ["later-t"]


def test_a_foreign_page_cannot_fill_the_tenant_cap_and_nothing_persists(fresh, tmp_path):
    data = str(tmp_path / "data")
    e = fresh("--data-dir", data)
    signups = blast(e.port, [post(f"{ITK}/accounts:signUp?key=x", '{"tenantId":"spam-%d"}' % i, EVIL) for i in range(1100)])
    assert signups == {404: 1100}, signups
    r = requests.post(e.url + f"{ITK}/accounts:signUp?key=x", data='{"tenantId":"spam-1"}', headers={"Origin": EVIL, "Content-Type": "text/plain"})
    assert error_message(r).startswith("TENANT_NOT_FOUND : ")
    assert "access-control-allow-origin" in {k.lower() for k in r.headers}  # a client endpoint: CORS stays open
    # Requests without an Origin that fail leave empty tenants behind: they neither fill the cap nor persist.
    failing = blast(e.port, [post(f"{ITK}/accounts:sendVerificationCode?key=x", '{"phoneNumber":"bad","tenantId":"junk-%d"}' % i) for i in range(1100)])
    assert failing == {400: 1100}, failing
    r = e.itk("signUp", {"tenantId": "tenant-abc12"})
    assert r.status_code == 200, r.text
    assert "tenant-abc12" in tenants(e)
    assert e.stop() == 0
    e2 = fresh("--data-dir", data)
    assert tenants(e2) == ["tenant-abc12"]
    r = e2.itk("signUp", {"tenantId": "tenant-def34"})
    assert r.status_code == 200, r.text


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def forged(now, **over):
    claims = {"iss": "https://securetoken.google.com/demo-phone", "aud": "demo-phone", "iat": now, "exp": now + 3600,
              "auth_time": now, "sub": "victim", "user_id": "victim"}
    claims.update(over)
    claims = {k: v for k, v in claims.items() if v is not None}
    return b64({"alg": "none", "typ": "JWT"}) + "." + b64(claims) + "."


def test_unsigned_tokens_from_a_foreign_page_are_refused(fresh):
    e = fresh("--token-signing", "none")
    r = e.session.post(e.url + f"{ITK}/projects/demo-phone/accounts", json={"localId": "victim", "phoneNumber": "+15550001111"}, headers=OWNER)
    assert r.status_code == 200, r.text
    now = e.session.get(e.url + "/emulator/v1/clock").json()["nowMillis"] // 1000
    token = forged(now)
    h = {"Origin": EVIL, "Content-Type": "text/plain"}
    for op, body in [("lookup", {"idToken": token}), ("update", {"idToken": token, "displayName": "owned", "email": "attacker@evil.example"}),
                     ("delete", {"idToken": token})]:
        r = requests.post(e.url + f"{ITK}/accounts:{op}?key=x", data=json.dumps(body), headers=h)
        assert r.status_code == 403, (op, r.text)
        assert r.json()["error"]["status"] == "PERMISSION_DENIED"
        assert "access-control-allow-origin" not in {k.lower() for k in r.headers}
    # The victim is untouched; SDKs (no Origin) and localhost pages keep working with unsigned tokens.
    r = requests.post(e.url + f"{ITK}/accounts:lookup?key=x", json={"idToken": token})
    assert r.status_code == 200 and r.json()["users"][0]["localId"] == "victim" and "displayName" not in r.json()["users"][0], r.text
    r = requests.post(e.url + f"{ITK}/accounts:lookup?key=x", json={"idToken": token}, headers={"Origin": "http://localhost:3000"})
    assert r.status_code == 200, r.text
    # A token without `sub` is not accepted through `user_id`, whoever sends it; nor one whose sub and user_id differ.
    for bad in [forged(now, sub=None), forged(now, user_id="someone-else"), forged(now, sub=["victim"])]:
        r = requests.post(e.url + f"{ITK}/accounts:lookup?key=x", json={"idToken": bad})
        assert r.status_code == 400 and error_message(r) == "INVALID_ID_TOKEN", r.text
    # The real flow: the emulator's own unsigned tokens, from no Origin.
    signed_in = e.sign_in()
    r = requests.post(e.url + f"{ITK}/accounts:lookup?key=x", json={"idToken": signed_in["idToken"]})
    assert r.status_code == 200, r.text
