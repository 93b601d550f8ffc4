"""`phone-auth-emulator exec [options] -- COMMAND`: the release binary starts the server, runs a real command against
it (a Python child using requests and firebase-admin) and returns the command's status."""
import fcntl
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import termios
import textwrap
import time

import pytest

from conftest import BINARY, FICTIONAL, FICTIONAL_CODE, ROOT

PY = sys.executable  # the venv's Python: requests and firebase-admin are installed there


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PHONE_AUTH_EMULATOR_") and k not in ("FIREBASE_AUTH_EMULATOR_HOST", "GCLOUD_PROJECT")}
    env.update(extra)
    return env


def run_exec(*args, env=None, timeout=60, **kw):
    return subprocess.run([BINARY, "exec", *args], cwd=ROOT, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout, **kw)


def script(body):
    """`python -c` for a child: the body, dedented."""
    return [PY, "-c", textwrap.dedent(body)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


SIGN_IN = """
    import json, os, requests
    base = os.environ["PHONE_AUTH_EMULATOR_URL"]
    itk = base + "/identitytoolkit.googleapis.com/v1/accounts:"
    s = requests.post(itk + "sendVerificationCode?key=k", json={"phoneNumber": "%s"}).json()["sessionInfo"]
    r = requests.post(itk + "signInWithPhoneNumber?key=k", json={"sessionInfo": s, "code": "%s"}).json()
    result = {"env": {k: os.environ.get(k) for k in ("FIREBASE_AUTH_EMULATOR_HOST", "PHONE_AUTH_EMULATOR_URL",
                                                     "GCLOUD_PROJECT", "PHONE_AUTH_EMULATOR_PROJECT")},
              "localId": r["localId"], "idToken": r["idToken"]}
""" % (FICTIONAL, FICTIONAL_CODE) + """
    print(json.dumps(result))
"""


def test_command_sees_the_variables_and_signs_in_through_them():
    # An inherited FIREBASE_AUTH_EMULATOR_HOST is replaced, not kept.
    r = run_exec("--", *script(SIGN_IN), env=clean_env(FIREBASE_AUTH_EMULATOR_HOST="127.0.0.1:1"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    host = out["env"]["FIREBASE_AUTH_EMULATOR_HOST"]
    assert host.startswith("127.0.0.1:") and host != "127.0.0.1:1" and host != "127.0.0.1:9099"
    assert out["env"]["PHONE_AUTH_EMULATOR_URL"] == "http://" + host
    assert out["env"]["GCLOUD_PROJECT"] == out["env"]["PHONE_AUTH_EMULATOR_PROJECT"] == "demo-phone"
    assert out["localId"] and out["idToken"].count(".") == 2
    # stdout is the command's alone: the server logs to stderr.
    assert r.stdout.count("\n") == 1
    assert "exec: the command exited with status 0" in r.stderr and "stopped" in r.stderr


def test_firebase_admin_in_the_command_needs_no_configuration():
    # A backend test as it would be written: firebase-admin reads FIREBASE_AUTH_EMULATOR_HOST and GCLOUD_PROJECT.
    body = textwrap.dedent(SIGN_IN).replace("print(json.dumps(result))", "") + textwrap.dedent("""
        import firebase_admin
        from firebase_admin import auth
        firebase_admin.initialize_app()
        claims = auth.verify_id_token(result["idToken"], check_revoked=True)
        assert claims["uid"] == result["localId"] and claims["phone_number"] == "%s", claims
        assert auth.get_user(result["localId"]).phone_number == "%s"
        print("verified", claims["aud"])
    """ % (FICTIONAL, FICTIONAL))
    r = run_exec("--project", "exec-project", "--test-phone", f"{FICTIONAL}={FICTIONAL_CODE}", "--", PY, "-c", body)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "verified exec-project"


def test_port_flag_is_used_and_the_config_files_port_is_not(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"port": free_port()}))
    r = run_exec("--config", str(config), "--", PY, "-c", "import os; print(os.environ['FIREBASE_AUTH_EMULATOR_HOST'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != "127.0.0.1:%d" % json.loads(config.read_text())["port"]
    port = free_port()
    r = run_exec("--port", str(port), "--", PY, "-c", "import os; print(os.environ['FIREBASE_AUTH_EMULATOR_HOST'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "127.0.0.1:%d" % port


@pytest.mark.parametrize("status", [0, 1, 3, 255])
def test_the_commands_exit_status_comes_back(status):
    r = run_exec("--", PY, "-c", f"import sys; sys.exit({status})")
    assert r.returncode == status, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_command_killed_by_a_signal_gives_128_plus_its_number(sig):
    r = run_exec("--", PY, "-c", f"import os; os.kill(os.getpid(), {int(sig)})")
    assert r.returncode == 128 + sig, r.stderr
    assert "stopped" in r.stderr


def test_the_command_starts_with_no_signal_blocked_or_ignored():
    # exec ignores SIGPIPE and blocks SIGINT/SIGTERM/SIGCHLD for itself; the command must inherit none of that (grep
    # changes neither, so its /proc/self/status shows what it was handed).
    r = run_exec("--", "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["SigBlk:", "0" * 16, "SigIgn:", "0" * 16]


def test_the_command_inherits_no_descriptor_of_the_server():
    r = run_exec("--", PY, "-c", "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))")
    assert r.returncode == 0, r.stderr
    # 0-2 and the descriptor listdir itself opened: no listener, epoll, eventfd, io_uring or log pipe.
    assert json.loads(r.stdout) == [0, 1, 2, 3]


def test_a_port_in_use_gives_a_distinct_status_and_message(tmp_path):
    marker = tmp_path / "ran"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_exec("--port", str(port), "--", "touch", str(marker))
    assert r.returncode == 69, (r.returncode, r.stderr)
    assert "could not start" in r.stderr and "in use" in r.stderr
    assert not marker.exists(), "the command must not run without a server"


def test_usage_and_settings_errors(tmp_path):
    r = run_exec(PY, "-c", "pass")
    assert r.returncode == 64 and "exec needs --" in r.stderr
    r = run_exec("--")
    assert r.returncode == 64 and "needs a command" in r.stderr
    r = run_exec("--help")
    assert r.returncode == 0 and "Usage: phone-auth-emulator exec" in r.stdout and "FIREBASE_AUTH_EMULATOR_HOST" in r.stdout
    r = run_exec("--no-such-flag", "1", "--", "true")
    assert r.returncode == 78 and "unknown option '--no-such-flag'" in r.stderr
    r = run_exec("--config", "/nonexistent/emulator.json", "--", "true")
    assert r.returncode == 78 and "does not exist" in r.stderr
    r = run_exec("--", "no-such-command-for-exec")
    assert r.returncode == 127 and "no-such-command-for-exec: command not found" in r.stderr
    plain = tmp_path / "plain"
    plain.write_text("exit 5\n")
    plain.chmod(0o644)
    r = run_exec("--", str(plain))
    assert r.returncode == 126 and f"{plain}: Permission denied" in r.stderr
    # Executable without a #! line: /bin/sh runs it, as a shell would.
    plain.chmod(0o755)
    r = run_exec("--", str(plain))
    assert r.returncode == 5, r.stderr
    # A name without a slash is looked up in PATH.
    r = run_exec("--", "plain", env=clean_env(PATH=f"/nonexistent:{tmp_path}:/usr/bin:/bin"))
    assert r.returncode == 5, r.stderr
    # The server's own --help names exec.
    h = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=20)
    assert "phone-auth-emulator exec [options] -- COMMAND" in h.stdout


def test_sigterm_reaches_the_command_and_stops_both(tmp_path):
    pidfile = tmp_path / "pid"
    child = textwrap.dedent(f"""
        import os, signal, sys, time
        def stop(sig, frame):
            print("child got", signal.Signals(sig).name, flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, stop)
        open({str(pidfile)!r} + ".tmp", "w").write(str(os.getpid()) + " " + os.environ["FIREBASE_AUTH_EMULATOR_HOST"])
        os.rename({str(pidfile)!r} + ".tmp", {str(pidfile)!r})
        time.sleep(120)
    """)
    proc = subprocess.Popen([BINARY, "exec", "--", PY, "-c", child], cwd=ROOT, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if pidfile.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        pid, host = pidfile.read_text().split()
        port = int(host.rsplit(":", 1)[1])
        assert not refused(port)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The command's handler ran (the signal was forwarded) and its status is exec's.
    assert proc.returncode == 7, err
    assert out == "child got SIGTERM\n"
    assert "received SIGTERM, forwarding it to the command" in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)  # no orphan: the command is gone (and was reaped)
    assert refused(port)      # and so is the server


def test_sigint_is_forwarded_and_its_status_comes_back():
    proc = subprocess.Popen([BINARY, "exec", "--", "sleep", "120"], cwd=ROOT, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = ""
    for line in iter(proc.stderr.readline, ""):
        err += line
        if "exec: running sleep" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, err + rest


def test_ctrl_c_in_a_terminal_reaches_the_command_once(tmp_path):
    # In a terminal, Ctrl-C goes to the whole foreground process group, exec and the command alike; exec must not send
    # the command a second SIGINT of its own.
    ready = tmp_path / "ready"
    child = textwrap.dedent(f"""
        import signal, sys, time
        count = 0
        def on_int(sig, frame):
            global count
            count += 1
        signal.signal(signal.SIGINT, on_int)
        open({str(ready)!r}, "w").close()
        while count == 0:
            time.sleep(0.01)
        time.sleep(1)  # room for a second SIGINT, if one were coming
        sys.exit(10 + count)
    """)
    master, slave = pty.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([BINARY, "exec", "--", PY, "-c", child], cwd=ROOT, env=clean_env(), stdin=slave,
                            stdout=slave, stderr=subprocess.PIPE, text=True, preexec_fn=controlling_terminal)
    os.close(slave)
    try:
        for _ in range(600):
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists()
        os.write(master, b"\x03")  # the terminal's interrupt character
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 11, err
    assert "SIGINT from the terminal, the command has it too" in err


def test_export_on_exit_is_written_after_the_command(tmp_path):
    out = tmp_path / "export"
    r = run_exec("--export-on-exit", str(out), "--", *script(SIGN_IN))
    assert r.returncode == 0, r.stderr
    uid = json.loads(r.stdout)["localId"]
    assert json.loads((out / "firebase-export-metadata.json").read_text())["auth"]
    users = json.loads((out / "auth_export" / "accounts.json").read_text())["users"]
    assert [(u["localId"], u["phoneNumber"]) for u in users] == [(uid, FICTIONAL)]


def test_a_failed_export_is_reported_unless_the_command_failed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    target = str(blocker / "export")
    r = run_exec("--export-on-exit", target, "--", "true")
    assert r.returncode == 70 and "export failed" in r.stderr, (r.returncode, r.stderr)
    r = run_exec("--export-on-exit", target, "--", "false")
    assert r.returncode == 1 and "export failed" in r.stderr
