"""PhoneAuthEmulator from Python tests: start the binary on a free port and drive its emulator API.

    from phone_auth_emulator import Emulator

    emu = Emulator.start()                   # PHONE_AUTH_EMULATOR_BIN, `phone-auth-emulator` on PATH, ./.build/release/
    token = emu.mint_token("alice", role="admin")   # a signed-in user's ID token, custom claims as keywords
    code = emu.wait_for_code("+15551234567")        # the code a send (by the app under test) produced
    emu.reset()                                      # back to the starting state (config file, --import)
    emu.stop()

With pytest, the plugin (installed with this package) gives the `phone_auth_emulator` fixture (one emulator per test
session, or per xdist worker) and `phone_auth` (the same emulator, reset before the test). Only the standard library.
"""
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Emulator", "EmulatorError", "find_binary"]

DEFAULT_PROJECT = "demo-phone"


class EmulatorError(Exception):
    """A call the emulator refused (the Google error envelope's `message` and HTTP status), or a start that failed."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message if status is None else f"{message} [HTTP {status}]")
        self.message = message
        self.status = status
        self.body = body


def find_binary(explicit=None, cwd=None):
    """The server binary: `explicit`, else $PHONE_AUTH_EMULATOR_BIN, else `phone-auth-emulator` on PATH, else
    ./.build/release/phone-auth-emulator (a checkout built with `swift build -c release`)."""
    for candidate in (explicit, os.environ.get("PHONE_AUTH_EMULATOR_BIN")):
        if candidate:
            if not os.access(candidate, os.X_OK):
                raise EmulatorError(f"phone-auth-emulator not found or not executable: {candidate}")
            return candidate
    on_path = shutil.which("phone-auth-emulator")
    if on_path:
        return on_path
    built = os.path.join(cwd or os.getcwd(), ".build", "release", "phone-auth-emulator")
    if os.access(built, os.X_OK):
        return built
    raise EmulatorError("phone-auth-emulator not found: set PHONE_AUTH_EMULATOR_BIN, put it on PATH, or build it "
                        "(swift build -c release) in the working directory")


class Emulator:
    """A PhoneAuthEmulator at `url` (`http://127.0.0.1:PORT`), for `project` (and its tenants); `admin_token`: the
    server's `--admin-token`, sent on every call (a started server's comes from its flags or environment)."""

    def __init__(self, url, project=DEFAULT_PROJECT, admin_token=None, process=None):
        self.url = url.rstrip("/")
        self.host = self.url.split("//", 1)[1]
        self.project = project
        self.admin_token = admin_token
        self.process = process
        self._log = []

    # -- the process ---------------------------------------------------------------------------------------------

    @classmethod
    def start(cls, binary=None, args=(), project=None, env=None, timeout=30):
        """Starts the binary on a free port (`--port 0`) and returns once it listens. `args` are server flags
        (`--test-phone`, `--import`, `--config`…); `project` becomes `--project`."""
        path = find_binary(binary)
        argv = [path, "--port", "0"]
        if project:
            argv += ["--project", project]
        argv += list(args)
        full_env = {k: v for k, v in os.environ.items() if k not in ("PHONE_AUTH_EMULATOR_PORT", "PHONE_AUTH_EMULATOR_HOST")}
        full_env.update(env or {})
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in iter(proc.stdout.readline, "")] + [lines.put(None)], daemon=True).start()
        log = []
        threading.Thread(target=lambda: log.extend(iter(proc.stderr.readline, "")), daemon=True).start()
        try:
            first = lines.get(timeout=timeout)
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise EmulatorError(f"phone-auth-emulator did not start within {timeout} s")
        match = re.match(r"listening on (http://\S+)", first or "")
        if not match:
            proc.wait(timeout=10)
            raise EmulatorError(f"phone-auth-emulator did not start (exit status {proc.returncode}): {''.join(log).strip()[-2000:]}")
        emu = cls(match.group(1), project=project or _ready_project(match.group(1)), process=proc,
                  admin_token=_flag(args, "--admin-token") or full_env.get("PHONE_AUTH_EMULATOR_ADMIN_TOKEN"))
        emu._log = log
        return emu

    def stop(self, timeout=15):
        """Stops a process this object started (SIGTERM, then SIGKILL after `timeout`); returns its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log(self):
        """What the server wrote to stderr so far."""
        return "".join(self._log)

    def environment(self):
        """The variables that point SDKs at this emulator (what `phone-auth-emulator exec` exports)."""
        env = {"FIREBASE_AUTH_EMULATOR_HOST": self.host, "PHONE_AUTH_EMULATOR_URL": self.url,
               "GCLOUD_PROJECT": self.project, "PHONE_AUTH_EMULATOR_PROJECT": self.project}
        if self.admin_token:
            env["PHONE_AUTH_EMULATOR_ADMIN_TOKEN"] = self.admin_token
        return env

    # -- the emulator API ----------------------------------------------------------------------------------------

    def request(self, method, path, body=None, query=None, timeout=30, raw=False):
        """One call; the JSON reply (the text with `raw`). Errors raise `EmulatorError` with Google's message."""
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.admin_token:
            headers["Authorization"] = "Bearer " + self.admin_token
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            try:
                parsed = json.loads(text)
                message = parsed["error"]["message"]
            except (ValueError, KeyError, TypeError):
                parsed, message = None, text[:200] or e.reason
            raise EmulatorError(message, status=e.code, body=parsed) from None
        if raw:
            return text
        return json.loads(text) if text else {}

    def _scope(self, tenant=None, project=None):
        return f"/emulator/v1/projects/{project or self.project}" + (f"/tenants/{tenant}" if tenant else "")

    def wait_for_code(self, phone, timeout=30, tenant=None):
        """The newest pending verification code for `phone`, or the first one sent within `timeout` seconds (≤ 300)."""
        entry = self.request("GET", self._scope(tenant) + "/verificationCodes:wait",
                             query={"phoneNumber": phone, "timeoutSeconds": str(timeout)}, timeout=timeout + 10)
        return entry["code"]

    def mint(self, uid, tenant=None, **fields):
        """`POST …/idTokens`: signs in `uid` (created, or the given fields updated) and returns
        `{idToken, refreshToken, expiresIn, localId, isNewUser}`. Fields as the API names them (`claims`,
        `phoneNumber`, `email`, `emailVerified`, `displayName`, `signInProvider`, `secondFactor`, `authTime`,
        `expiresIn`) or in snake_case."""
        body = {"uid": uid}
        for k, v in fields.items():
            if v is not None:
                body[_camel(k)] = v
        return self.request("POST", self._scope(tenant) + "/idTokens", body)

    def mint_token(self, uid, *, tenant=None, phone_number=None, email=None, email_verified=None, display_name=None,
                   sign_in_provider=None, second_factor=None, auth_time=None, expires_in=None, **claims):
        """A signed-in user's ID token for `uid`, with `claims` (keywords) as its custom claims."""
        return self.mint(uid, tenant=tenant, claims=claims or None, phoneNumber=phone_number, email=email, emailVerified=email_verified,
                         displayName=display_name, signInProvider=sign_in_provider, secondFactor=second_factor, authTime=auth_time,
                         expiresIn=expires_in)["idToken"]

    def reset(self, all=False, project=None):
        """Back to the starting state: the project (with its tenants), or with `all` every project and the clock."""
        if all:
            return self.request("POST", "/emulator/v1:reset", {})
        return self.request("POST", self._scope(project=project) + ":reset", {})

    def snapshot(self, name, project=None):
        """Saves the project's state (with its tenants) as `name`."""
        return self.request("POST", self._scope(project=project) + ":snapshot", {"name": name})

    def restore(self, name, project=None):
        """Puts the snapshot `name` back."""
        return self.request("POST", self._scope(project=project) + ":restore", {"name": name})

    def events(self, types=None, since=0, tenant=None):
        """The store's retained events (oldest first) after event id `since`, optionally only `types`
        (`"code.sent"`, `"user.*"`…), as dicts."""
        query = [("format", "jsonl"), ("follow", "false"), ("since", str(since))]
        if types:
            query += [("type", t) for t in ([types] if isinstance(types, str) else types)]
        text = self.request("GET", self._scope(tenant) + "/events", query=query, raw=True)
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _flag(args, name):
    """The value of `name VALUE` or `name=VALUE` in `args`, else None."""
    args = list(args)
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _ready_project(url):
    """The server's default project, from its readiness reply."""
    try:
        with urllib.request.urlopen(url + "/", timeout=10) as resp:
            return json.loads(resp.read().decode()).get("phoneAuthEmulator", {}).get("projectId") or DEFAULT_PROJECT
    except (OSError, ValueError):
        return DEFAULT_PROJECT
