"""GET /emulator/openapi.json against the release binary: a valid OpenAPI 3 document (openapi-spec-validator, an
independent implementation of the OpenAPI schema) that names every routed path, and every operation in it fuzzed
by schemathesis for a bounded time (FUZZ_OPENAPI_SECONDS, 30 by default): no answer is a 5xx, every status and
media type is one the document declares, and every 4xx body is the Google error envelope the document describes
(`{"error": {"code", "message", "errors": [...], "status"}}`)."""
import http.server
import os
import shutil
import subprocess
import sys

import pytest
import requests

from conftest import Emulator, send_json, serve_in_background

SECONDS = int(os.environ.get("FUZZ_OPENAPI_SECONDS", "30"))
# Answers that never end by design (the event stream follows by default; the long polls wait up to their timeout).
EXCLUDED = r"(/events$|:wait$)"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("openapi")
    e = Emulator(["--export-root", str(root)], cwd=str(root))
    yield e
    e.stop()


def spec_of(e):
    r = requests.get(e.url + "/emulator/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text[:200]
    return r.json()


def test_the_status_names_the_document(served):
    assert requests.get(served.url + "/", headers={"Accept": "application/json"}).json()["authEmulator"]["apiSpec"] == "/emulator/openapi.json"


def test_is_valid_openapi_3(served):
    from openapi_spec_validator import validate
    spec = spec_of(served)
    validate(spec)
    assert spec["openapi"].startswith("3.")


def test_describes_what_is_served(served):
    spec = spec_of(served)
    ops = [(m, p) for p, item in spec["paths"].items() for m in item]
    assert len(ops) == len(set(ops)) and len(ops) > 150
    for method, path in [("post", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber"),
                         ("post", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPhoneNumber"),
                         ("post", "/www.googleapis.com/identitytoolkit/v3/relyingparty/downloadAccount"),
                         ("post", "/identitytoolkit.googleapis.com/v1/projects/{project}/tenants/{tenant}/accounts:query"),
                         ("get", "/emulator/openapi.json")]:
        assert method in spec["paths"][path], (method, path)
    # A path nobody serves answers 404 with the envelope, and is not in the document.
    r = requests.post(served.url + "/identitytoolkit.googleapis.com/v1/accounts:nothing", json={}, params={"key": "k"})
    assert r.status_code == 404 and r.json()["error"]["code"] == 404
    assert "/identitytoolkit.googleapis.com/v1/accounts:nothing" not in spec["paths"]
    # Every described operation is routed: a request to its path with its method never answers 404 or 405 from the
    # router (a handler's own 404, such as USER_NOT_FOUND or a missing snapshot, names what is missing).
    for path, item in spec["paths"].items():
        concrete = path.replace("{project}", "demo-phone").replace("{tenant}", "t1").replace("{file}", "handler.js" if path.startswith("/emulator/auth/assets/") else "index.html") \
            .replace("{snapshot}", "s").replace("{config}", "c").replace("{app}", "1:1:web:1")
        for method in item:
            if path.endswith("/events") or path.endswith(":wait"):
                continue
            r = requests.request(method.upper(), served.url + concrete, headers={"Authorization": "Bearer owner"},
                                 params={"key": "k"}, data="{}" if method in ("post", "patch") else None, allow_redirects=False)
            assert r.status_code != 405, (method, path, r.text[:200])
            if r.status_code == 404:
                assert r.json()["error"]["message"] != "Not Found", (method, path)


def schemathesis(url, seconds, cwd, quick=False):
    """The fuzz run: every operation, both valid and invalid inputs, for `seconds` in all. One worker: schemathesis'
    threads occasionally trip CPython's AST recursion check (a runtime error of the tool, not of the server)."""
    # Installed with the other requirements (Tests/Interop/requirements.txt): a missing fuzzer fails, never skips.
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    if not os.path.exists(exe):
        exe = shutil.which("schemathesis")
    assert exe, "schemathesis is not installed: pip install -r Tests/Interop/requirements.txt"
    cmd = [exe, "run", url + "/emulator/openapi.json", "--url", url,
           "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
           "--header", "Authorization: Bearer owner",
           "--exclude-path-regex", EXCLUDED,
           "--max-time", str(seconds), "--request-timeout", "10", "--workers", "1",
           "--phases", "coverage,fuzzing", "--generation-database", "none", "--no-color"]
    if quick:
        # One generated case, stop at the first failure.
        cmd[cmd.index("coverage,fuzzing")] = "fuzzing"
        cmd += ["--max-examples", "1", "--no-shrink", "--max-failures", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=str(cwd))


def test_the_fuzz_run_can_fail(tmp_path):
    """The same invocation against a one-operation server that answers 500 and a bare-string 400: it fails."""
    spec = {"openapi": "3.0.3", "info": {"title": "broken", "version": "1"}, "paths": {"/broken": {"post": {
        "operationId": "broken", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {"200": {"description": "ok"}}}}}}

    class Broken(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            send_json(self, 200, spec)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            send_json(self, 500, {"error": "boom"})

    server = serve_in_background(Broken)
    try:
        p = schemathesis(f"http://127.0.0.1:{server.server_port}", 60, tmp_path, quick=True)
    finally:
        server.shutdown()
    assert p.returncode != 0 and "Server error" in p.stdout, p.stdout[-3000:]


def test_fuzz_every_operation(served, tmp_path):
    p = schemathesis(served.url, SECONDS, tmp_path)
    tail = p.stdout[-12000:]
    assert p.returncode == 0, f"schemathesis found failures:\n{tail}\n{p.stderr[-2000:]}"
    # The emulator logged no crash: an unexpected error becomes a logged 500, which the checks above refuse.
    assert "internal error" not in served.log().lower(), served.log()[-3000:]
