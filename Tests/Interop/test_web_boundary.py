"""Issue 11: the browser boundary, against the release binary with raw HTTP.

A web page in the developer's browser may send "simple" cross-site requests (text/plain POSTs, no preflight) and may
rebind a DNS name it owns to 127.0.0.1; it cannot hide its Origin or choose the Host header. The emulator API and
admin calls refuse other origins, every request must name this server in Host, and requests without Origin (curl,
SDKs, the CLI) work as before."""
import http.client
import json
import os
import socket
import subprocess

from conftest import FICTIONAL, ROOT

CLI = os.environ.get("PHONE_AUTH_CLI_BIN", os.path.join(ROOT, ".build", "release", "phone-auth"))
EVIL = "https://evil.example"
OWNER = ("Authorization", "Bearer owner")
P = "/emulator/v1/projects/demo-phone"


def raw(emu, method, path, headers=(), body=b"", host=None):
    """One request with exactly these headers (Host defaults to the address the server printed)."""
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=15)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", host or emu.host_port)
    for k, v in headers:
        conn.putheader(k, v)
    if isinstance(body, str):
        body = body.encode()
    if body or method in ("POST", "PATCH", "PUT"):
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body or None)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, (json.loads(data) if data else None)


def simple_post(emu, path, body, origin=EVIL, extra=()):
    """What a cross-site <form enctype=text/plain> or fetch(mode:'no-cors') sends: no preflight."""
    return raw(emu, "POST", path, [("Origin", origin), ("Content-Type", "text/plain;charset=UTF-8"), *extra], json.dumps(body))


def denied(resp, what="Origin not allowed"):
    status, headers, body = resp
    return (status == 403 and body["error"]["status"] == "PERMISSION_DENIED"
            and body["error"]["message"].startswith("PERMISSION_DENIED : " + what)
            and "access-control-allow-origin" not in headers)


def users(emu):
    _, _, body = raw(emu, "GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet", [OWNER])
    return body.get("users", [])


def config(emu):
    return raw(emu, "GET", P + "/config")[2]


def test_the_issue_attack_is_refused_and_has_no_effect(fresh, tmp_path):
    emu = fresh()
    target = tmp_path / "D"
    # 1 and 3: export into a directory of the attacker's choosing.
    assert denied(simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": str(target) + "/auth_export/accounts-"}))
    assert denied(simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": str(target)}))
    assert not target.exists()
    # The config PATCH that makes a victim's number fictional with the attacker's code.
    before = config(emu)
    patch = {"signIn": {"phoneNumber": {"testPhoneNumbers": {"+15555550199": "111111"}}}}
    assert denied(raw(emu, "PATCH", P + "/config", [("Origin", EVIL), ("Content-Type", "text/plain")], json.dumps(patch)))
    assert config(emu) == before
    # accounts:signUp with an admin Bearer (what a page could send if it knew "owner").
    body = {"tenantId": "t1", "displayName": "$(id>/tmp/x)"}
    assert denied(simple_post(emu, "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=x", body, extra=[OWNER]))
    assert users(emu) == []
    # The rest of the emulator API: wipe, clock, keys, codes, minted credentials.
    emu.sign_in()
    assert len(users(emu)) == 1
    assert denied(raw(emu, "DELETE", P + "/accounts", [("Origin", EVIL)]))
    assert len(users(emu)) == 1
    clock = raw(emu, "GET", "/emulator/v1/clock")[2]
    assert denied(simple_post(emu, "/emulator/v1/clock:advance", {"seconds": 3600}))
    assert raw(emu, "GET", "/emulator/v1/clock")[2]["offsetSeconds"] == clock["offsetSeconds"]
    keys = raw(emu, "GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")[2]
    assert denied(simple_post(emu, "/emulator/v1/keys:rotate", {}))
    assert raw(emu, "GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")[2] == keys
    emu.send("+15551230001")
    assert denied(raw(emu, "GET", P + "/verificationCodes", [("Origin", EVIL)]))
    assert denied(raw(emu, "GET", P + "/verificationCodes:wait?phoneNumber=%2B15551230001&timeoutSeconds=0", [("Origin", EVIL)]))
    assert denied(raw(emu, "DELETE", P + "/verificationCodes", [("Origin", EVIL)]))
    assert len(raw(emu, "GET", P + "/verificationCodes")[2]["verificationCodes"]) == 1
    # Percent-encoding the path does not slip past the classification.
    assert denied(raw(emu, "DELETE", "/%65mulator/v1/projects/demo-phone/accounts", [("Origin", EVIL)]))
    assert len(users(emu)) == 1
    # Admin routes, whatever the method and content type.
    for method, path in [("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"),
                         ("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"),
                         ("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchDelete"),
                         ("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts")]:
        for ct in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json"]:
            assert denied(raw(emu, method, path, [("Origin", EVIL), ("Content-Type", ct), OWNER], "{}")), (method, path, ct)
    assert len(users(emu)) == 1


def test_origin_null_is_refused(emu):
    assert denied(raw(emu, "GET", P + "/config", [("Origin", "null")]))
    assert denied(simple_post(emu, "/emulator/v1/clock:advance", {"seconds": 1}, origin="null"))


def test_localhost_pages_are_allowed_and_get_cors(emu):
    # The JS SDK's page on localhost:3000 (and the Emulator UI on 127.0.0.1:4000) may use the emulator API.
    for origin in ["http://localhost:3000", "http://127.0.0.1:4000", "http://[::1]:5173", "https://localhost"]:
        status, headers, body = raw(emu, "GET", P + "/config", [("Origin", origin)])
        assert status == 200 and headers["access-control-allow-origin"] == origin and "Origin" in headers["vary"]
        status, headers, _ = raw(emu, "OPTIONS", P + "/config",
                                 [("Origin", origin), ("Access-Control-Request-Method", "PATCH"),
                                  ("Access-Control-Request-Headers", "content-type"), ("Access-Control-Request-Private-Network", "true")])
        assert status == 204
        assert headers["access-control-allow-origin"] == origin
        assert headers["access-control-allow-headers"] == "content-type"
        assert headers["access-control-allow-private-network"] == "true"
    status, headers, body = raw(emu, "PATCH", P + "/config", [("Origin", "http://localhost:3000"), ("Content-Type", "application/json")],
                                json.dumps({"phoneAuth": {"maxCodeAttempts": 4}}))
    assert status == 200 and body["phoneAuth"]["maxCodeAttempts"] == 4
    raw(emu, "PATCH", P + "/config", [("Content-Type", "application/json")], json.dumps({"phoneAuth": {"maxCodeAttempts": 5}}))
    # The whole phone flow from that page (the JS SDK sends no Authorization).
    status, headers, body = raw(emu, "POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                [("Origin", "http://localhost:3000"), ("Content-Type", "application/json")],
                                json.dumps({"phoneNumber": "+15551230002"}))
    assert status == 200 and headers["access-control-allow-origin"] == "http://localhost:3000"
    status, _, codes = raw(emu, "GET", P + "/verificationCodes?phoneNumber=%2B15551230002", [("Origin", "http://localhost:3000")])
    assert status == 200 and codes["verificationCodes"][0]["sessionInfo"] == body["sessionInfo"]


def test_client_endpoints_stay_open_to_any_origin_without_pna(emu):
    origin = "https://app.example"
    status, headers, body = raw(emu, "POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                [("Origin", origin), ("Content-Type", "application/json")], json.dumps({"phoneNumber": FICTIONAL}))
    assert status == 200 and headers["access-control-allow-origin"] == origin
    for path in ["/", "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com",
                 "/securetoken.google.com/demo-phone/.well-known/openid-configuration",
                 "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k"]:
        status, headers, _ = raw(emu, "GET", path, [("Origin", origin)])
        assert status == 200 and headers["access-control-allow-origin"] == origin, path
    status, headers, _ = raw(emu, "OPTIONS", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                             [("Origin", origin), ("Access-Control-Request-Method", "POST"),
                              ("Access-Control-Request-Headers", "content-type,x-client-version"),
                              ("Access-Control-Request-Private-Network", "true")])
    assert status == 204
    assert headers["access-control-allow-origin"] == origin
    assert headers["access-control-allow-headers"] == "content-type,x-client-version"
    # Private Network Access (a public page reaching this loopback server) only for allowed origins.
    assert "access-control-allow-private-network" not in headers
    # A preflight for a protected route from that origin gets nothing to work with.
    for path, method, requested in [(P + "/config", "PATCH", "content-type"),
                                    ("/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", "POST", "authorization,content-type")]:
        status, headers, _ = raw(emu, "OPTIONS", path, [("Origin", origin), ("Access-Control-Request-Method", method),
                                                        ("Access-Control-Request-Headers", requested),
                                                        ("Access-Control-Request-Private-Network", "true")])
        assert status == 403 and not any(h.startswith("access-control-allow") for h in headers), path


def test_requests_without_origin_work_as_before(fresh):
    emu = fresh()
    emu.sign_in()
    emu.send("+15551230003")
    # curl -X DELETE …/accounts ; curl -d '{…}' (form content type, as curl sends) ; no content type at all.
    assert raw(emu, "DELETE", P + "/accounts")[0] == 200
    assert users(emu) == []
    status, _, body = raw(emu, "PATCH", P + "/config", [("Content-Type", "application/x-www-form-urlencoded")],
                          json.dumps({"phoneAuth": {"codeLength": 8}}))
    assert status == 200 and body["phoneAuth"]["codeLength"] == 8
    assert raw(emu, "POST", "/emulator/v1/clock:advance", [], json.dumps({"seconds": 1}))[0] == 200
    assert raw(emu, "DELETE", P + "/verificationCodes")[0] == 200
    # HTTP/1.0 without any Host header.
    with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as s:
        s.sendall(b"GET /emulator/v1/clock HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:100]


def test_host_header_must_name_this_server(fresh):
    emu = fresh()
    # DNS rebinding: the attacker's name now points at 127.0.0.1; the browser sends that name as Host.
    for host in ["evil.example", f"evil.example:{emu.port}", f"localhost.evil.example:{emu.port}", f"auth:{emu.port}"]:
        assert denied(raw(emu, "GET", P + "/verificationCodes", host=host), "Host not allowed"), host
        assert denied(raw(emu, "POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k",
                          [("Content-Type", "application/json")], "{}", host=host), "Host not allowed"), host
        assert denied(raw(emu, "OPTIONS", P + "/config", [("Origin", f"http://{host}")], host=host), "Host not allowed"), host
    assert users(emu) == []
    # Loopback names and IP literals (the Android emulator's 10.0.2.2, a LAN phone's view of this machine).
    for host in [f"localhost:{emu.port}", "localhost", f"127.0.0.1:{emu.port}", f"[::1]:{emu.port}", "10.0.2.2:9099",
                 "192.168.1.20:9099", f"LOCALHOST:{emu.port}"]:
        assert raw(emu, "GET", P + "/config", host=host)[0] == 200, host
    # A page this server itself served, reached by IP, counts as the server's own origin.
    status, headers, _ = raw(emu, "GET", P + "/config", [("Origin", "http://10.0.2.2:9099")], host="10.0.2.2:9099")
    assert status == 200 and headers["access-control-allow-origin"] == "http://10.0.2.2:9099"
    assert denied(raw(emu, "GET", P + "/config", [("Origin", "http://10.0.2.2:9098")], host="10.0.2.2:9099"))


def test_allow_host_and_allow_origin(fresh):
    emu = fresh("--allow-host", "emu.example.test", "--allow-origin", "https://admin.example.test",
                "--allow-origin", "http://192.168.1.20:3000")
    assert raw(emu, "GET", P + "/config", host=f"emu.example.test:{emu.port}")[0] == 200
    assert denied(raw(emu, "GET", P + "/config", host=f"other.example.test:{emu.port}"), "Host not allowed")
    for origin in ["https://admin.example.test", "http://192.168.1.20:3000"]:
        status, headers, _ = raw(emu, "GET", P + "/config", [("Origin", origin)])
        assert status == 200 and headers["access-control-allow-origin"] == origin
        status, headers, _ = raw(emu, "OPTIONS", P + "/config", [("Origin", origin), ("Access-Control-Request-Method", "PATCH"),
                                                               ("Access-Control-Request-Private-Network", "true")])
        assert status == 204 and headers["access-control-allow-private-network"] == "true"
    assert denied(raw(emu, "GET", P + "/config", [("Origin", "http://admin.example.test")]))
    assert denied(raw(emu, "GET", P + "/config", [("Origin", "http://192.168.1.20:3001")]))
    # The same through the environment, comma-separated.
    env_emu = fresh(env={"PHONE_AUTH_EMULATOR_ALLOW_ORIGINS": "https://a.example.test, https://b.example.test",
                         "PHONE_AUTH_EMULATOR_ALLOW_HOSTS": "a.example.test,b.example.test"})
    for name in ["a", "b"]:
        status, headers, _ = raw(env_emu, "GET", P + "/config", [("Origin", f"https://{name}.example.test")],
                                 host=f"{name}.example.test:{env_emu.port}")
        assert status == 200 and headers["access-control-allow-origin"] == f"https://{name}.example.test"
    assert denied(raw(env_emu, "GET", P + "/config", [("Origin", "https://c.example.test")]))


def test_invalid_allow_values_stop_start_up(tmp_path):
    import conftest
    for args in (["--allow-origin", "null"], ["--allow-origin", "*"], ["--allow-host", "bad host"]):
        p = subprocess.run([conftest.BINARY, "--port", "0", *args], capture_output=True, text=True, timeout=30,
                           env={k: v for k, v in os.environ.items() if not k.startswith("PHONE_AUTH_EMULATOR_")})
        assert p.returncode == 2 and "invalid --allow-" in p.stderr, (args, p.stderr)


def cli(emu, *args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("FIREBASE_AUTH_EMULATOR_HOST", "PHONE_AUTH_EMULATOR_ADMIN_TOKEN")}
    env.update(env_extra or {})
    return subprocess.run([CLI, *args, "--emulator", emu.url], capture_output=True, text=True, env=env, timeout=30)


def test_admin_token_protects_the_emulator_api_and_the_cli_sends_it(fresh):
    token = "s3cret-admin-token"
    emu = fresh("--admin-token", token)
    bearer = ("Authorization", f"Bearer {token}")
    emu.sign_in()
    emu.send("+15551230004")
    for method, path in [("GET", P + "/verificationCodes"), ("GET", P + "/config"), ("DELETE", P + "/accounts"),
                         ("POST", "/emulator/v1/clock:advance"), ("POST", "/emulator/v1/keys:rotate"),
                         ("POST", "/emulator/v1/projects/demo-phone:export"), ("GET", P + "/pushNotifications")]:
        for headers in ([], [OWNER], [("Authorization", "Bearer wrong-token-value")]):
            status, _, body = raw(emu, method, path, headers, "{}" if method == "POST" else b"")
            assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED", (method, path, headers)
    assert len(users(emu)) == 0  # batchGet with "owner" is refused too…
    status, _, body = raw(emu, "GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet", [bearer])
    assert status == 200 and len(body["users"]) == 1  # …and the user is still there.
    status, _, body = raw(emu, "GET", P + "/verificationCodes", [bearer])
    assert status == 200 and len(body["verificationCodes"]) == 1
    # The token does not let another web origin in.
    assert denied(raw(emu, "GET", P + "/verificationCodes", [bearer, ("Origin", EVIL)]))
    # Client endpoints stay open.
    assert emu.sign_in()["phoneNumber"] == FICTIONAL

    # The CLI: --admin-token (before or after the command) or PHONE_AUTH_EMULATOR_ADMIN_TOKEN.
    r = cli(emu, "codes", "--json")
    assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr
    r = cli(emu, "--admin-token", token, "codes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verificationCodes"][0]["phoneNumber"] == "+15551230004"
    r = cli(emu, "users", "list", "--json", "--admin-token", token)
    assert r.returncode == 0 and len(json.loads(r.stdout)["users"]) == 1, r.stderr
    env = {"PHONE_AUTH_EMULATOR_ADMIN_TOKEN": token}
    r = cli(emu, "config", "set", '{"phoneAuth":{"maxCodeAttempts":3}}', "--json", env_extra=env)
    assert r.returncode == 0 and json.loads(r.stdout)["phoneAuth"]["maxCodeAttempts"] == 3, r.stderr
    r = cli(emu, "sign-in", "+15551230005", "--json", env_extra=env)  # send (admin), inbox (emulator API), verify
    assert r.returncode == 0 and json.loads(r.stdout)["phoneNumber"] == "+15551230005", r.stderr
    r = cli(emu, "reset", "--json", env_extra=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(cli(emu, "users", "list", "--json", env_extra=env).stdout)["users"] == []
    r = cli(emu, "users", "list", "--admin-token", "wrong-token-value")
    assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr
    r = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=30)
    assert "--admin-token" in r.stdout and "PHONE_AUTH_EMULATOR_ADMIN_TOKEN" in r.stdout
