"""Issue 11: one boundary for identifiers; exports only inside --export-root; bounded projects and tenants;
NUL-safe storage; canonical sessionInfo; log lines that cannot be forged. Against the release binary."""
import json
import os
import signal

import requests

from conftest import FICTIONAL, Emulator, error_message

ITK = "/identitytoolkit.googleapis.com/v1"
OWNER = {"Authorization": "Bearer owner"}
OUTSIDE_ROOT = "INVALID_ARGUMENT : path must be a directory inside the export root"


def simple_post(emu, path, body, params=None):
    """What a web page can send without a preflight: text/plain, here without Origin (the origin policy is tested
    elsewhere): the file system must be safe on its own."""
    return requests.post(emu.url + path, data=json.dumps(body), params=params or {}, headers={"Content-Type": "text/plain"})


def tree(path):
    out = []
    for base, dirs, files in os.walk(path):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(base, n), path))
    return sorted(out)


def test_the_three_request_file_write_attack_writes_nothing_outside_the_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    target = tmp_path / "home" / ".bashrc"
    target.parent.mkdir()
    target.write_text("precious\n")
    emu = Emulator(["--export-root", str(root)])
    try:
        # Step 1 in one request creates three directories: refused since the export depth bound (red-team follow-up);
        # an attacker can still get there in two steps, so the rest must hold on its own.
        r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "D/auth_export/accounts-"})
        assert r.status_code == 400, r.text
        assert simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "D"}).status_code == 200
        r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "D/auth_export/accounts-"})
        assert r.status_code == 200, r.text
        # accounts-<tenant>.json inside D/auth_export/accounts-/ climbs to the target, the NUL ends the C path.
        depth = len(str(root / "D" / "auth_export" / "accounts-").split("/"))
        tenant = "/.." * depth + str(target) + "\u0000"
        r = simple_post(emu, ITK + "/accounts:signUp", {"tenantId": tenant, "displayName": "$(id>/tmp/x)"}, {"key": "x"})
        assert r.status_code == 400
        assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert error_message(r) == "INVALID_TENANT_ID : The tenant ID must be a valid non-empty string."
        r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "D"})
        assert r.status_code == 200, r.text
        assert r.json()["tenants"] == 0
    finally:
        assert emu.stop() == 0
    assert target.read_text() == "precious\n"
    assert tree(tmp_path / "home") == [".bashrc"]
    assert sorted(os.listdir(root / "D" / "auth_export")) == ["accounts-", "accounts.json", "config.json"]


def test_export_refuses_paths_outside_the_root_without_naming_them(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "exists").mkdir()
    os.symlink(outside, root / "link")
    os.symlink(outside / "victim.json", root / "dangling")
    (root / "plain").write_text("x")
    emu = Emulator(["--export-root", str(root)])
    try:
        for path in ["..", "../outside", "a/../../outside", str(outside), str(outside / "exists"), str(outside / "missing"),
                     "/etc", str(root) + "/../outside", "link", "link/deeper", "dangling", "plain", "plain/x", "x\u0000y"]:
            r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": path})
            assert r.status_code == 400, (path, r.text)
            assert error_message(r) == OUTSIDE_ROOT, path
            assert str(tmp_path) not in r.text
        assert tree(outside) == ["exists"]
        # Inside the root: relative and absolute paths work.
        assert simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "a/b"}).status_code == 200
        assert simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": str(root / "c")}).status_code == 200
        assert (root / "a" / "b" / "auth_export" / "accounts.json").exists()
        assert (root / "c" / "firebase-export-metadata.json").exists()
        # A symlink planted where a file will be written is replaced, never written through.
        os.unlink(root / "c" / "auth_export" / "accounts.json")
        os.symlink(outside / "victim.json", root / "c" / "auth_export" / "accounts.json")
        assert simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "c"}).status_code == 200
        assert not os.path.islink(root / "c" / "auth_export" / "accounts.json")
        assert tree(outside) == ["exists"]
    finally:
        assert emu.stop() == 0
    assert "export refused" in emu.log()


def test_the_export_root_defaults_to_the_working_directory(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    emu = Emulator([], cwd=str(cwd))
    try:
        assert simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "exp"}).status_code == 200
        r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": str(tmp_path / "elsewhere")})
        assert r.status_code == 400 and error_message(r) == OUTSIDE_ROOT
    finally:
        assert emu.stop() == 0
    assert (cwd / "exp" / "auth_export" / "accounts.json").exists()
    assert not (tmp_path / "elsewhere").exists()


def test_export_on_exit_and_import_read_and_write_official_tenant_files(tmp_path):
    out = tmp_path / "exit-export"
    emu = Emulator(["--export-on-exit", str(out)])
    requests.post(emu.url + ITK + "/projects/demo-phone/tenants/team-a-x1y2z/accounts", json={"localId": "in-tenant"}, headers=OWNER)
    assert emu.stop() == 0
    assert (out / "auth_export" / "accounts-team-a-x1y2z.json").exists()
    b = Emulator(["--import", str(out)])
    try:
        r = requests.post(b.url + ITK + "/projects/demo-phone/tenants/team-a-x1y2z/accounts:lookup", json={"localId": ["in-tenant"]}, headers=OWNER)
        assert r.json()["users"][0]["localId"] == "in-tenant"
    finally:
        assert b.stop() == 0


def test_tenants_created_on_first_use_are_capped_per_project():
    emu = Emulator(["--token-signing", "none"])
    try:
        s = requests.Session()
        for i in range(1000):
            r = s.post(emu.url + ITK + "/accounts:signUp", params={"key": "x"}, json={"tenantId": f"t-{i}"})
            assert r.status_code == 200, (i, r.text)
        r = s.post(emu.url + ITK + "/accounts:signUp", params={"key": "x"}, json={"tenantId": "t-1000"})
        assert r.status_code == 400
        assert error_message(r) == "QUOTA_EXCEEDED : Too many tenants: a project holds at most 1000 tenants."
        # Existing tenants keep working; another project has its own allowance.
        assert s.post(emu.url + ITK + "/accounts:signUp", params={"key": "x"}, json={"tenantId": "t-999"}).status_code == 200
        r = s.post(emu.url + ITK + "/projects/other/tenants/t-1000/accounts", json={}, headers=OWNER)
        assert r.status_code == 200, r.text
    finally:
        assert emu.stop() == 0


def test_create_on_first_use_switch_gives_tenant_not_found(tmp_path):
    emu = Emulator([])
    try:
        r = requests.patch(emu.url + "/emulator/v1/projects/demo-phone/config", json={"tenants": {"createOnFirstUse": False}})
        assert r.status_code == 200 and r.json()["tenants"] == {"createOnFirstUse": False}
        assert requests.get(emu.url + "/emulator/v1/projects/demo-phone/config").json()["tenants"] == {"createOnFirstUse": False}
        r = emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL, "tenantId": "team-a"})
        assert r.status_code == 404 and error_message(r) == "TENANT_NOT_FOUND"
        r = requests.post(emu.url + ITK + "/projects/demo-phone/tenants/team-a/accounts", json={}, headers=OWNER)
        assert r.status_code == 404 and error_message(r) == "TENANT_NOT_FOUND"
        created = requests.post(emu.url + "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants",
                                json={"displayName": "Team-A"}, headers=OWNER).json()
        tid = created["name"].rsplit("/", 1)[1]
        assert emu.itk("signUp", {"tenantId": tid}).status_code == 200
        r = requests.patch(emu.url + "/emulator/v1/projects/demo-phone/config", json={"tenants": {"createOnFirstUse": "no"}})
        assert r.status_code == 400
    finally:
        assert emu.stop() == 0
    # The same switch from the config file.
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"projects": {"demo-phone": {"tenants": {"createOnFirstUse": False}}}}))
    emu = Emulator(["--config", str(cfg)])
    try:
        r = emu.itk("signUp", {"tenantId": "team-b"})
        assert r.status_code == 404 and error_message(r) == "TENANT_NOT_FOUND"
    finally:
        assert emu.stop() == 0


def test_max_projects_bounds_projects_created_on_first_use():
    emu = Emulator(["--max-projects", "3"])
    try:
        s = requests.Session()
        # Reads of never-used projects answer from defaults and do not count.
        for i in range(50):
            assert s.get(f"{emu.url}/emulator/v1/projects/read-{i}/config").status_code == 200
        assert s.patch(f"{emu.url}/emulator/v1/projects/p1/config", json={}).status_code == 200
        assert s.delete(f"{emu.url}/emulator/v1/projects/p2/accounts").status_code == 200
        r = s.patch(f"{emu.url}/emulator/v1/projects/p3/config", json={})
        assert r.status_code == 400
        assert error_message(r) == "QUOTA_EXCEEDED : Too many projects: this emulator holds at most 3 (--max-projects)."
        r = s.post(emu.url + ITK + "/projects/p4/accounts", json={}, headers=OWNER)
        assert error_message(r).startswith("QUOTA_EXCEEDED")
        assert s.patch(f"{emu.url}/emulator/v1/projects/p1/config", json={}).status_code == 200
        assert emu.sign_in()["localId"]
    finally:
        assert emu.stop() == 0
    env = Emulator([], env={"PHONE_AUTH_EMULATOR_MAX_PROJECTS": "2"})
    try:
        assert env.session.patch(f"{env.url}/emulator/v1/projects/p1/config", json={}).status_code == 200
        assert error_message(env.session.patch(f"{env.url}/emulator/v1/projects/p2/config", json={})).startswith("QUOTA_EXCEEDED")
    finally:
        assert env.stop() == 0


def test_nul_in_a_uid_is_refused_and_users_never_merge(tmp_path):
    data = str(tmp_path / "data")
    emu = Emulator(["--data-dir", data])
    try:
        r = requests.post(emu.url + ITK + "/projects/demo-phone/accounts", json={"localId": "victim", "phoneNumber": "+15550001000"}, headers=OWNER)
        assert r.status_code == 200
        r = requests.post(emu.url + ITK + "/projects/demo-phone/accounts", json={"localId": "victim\u0000x", "phoneNumber": "+15550001001"}, headers=OWNER)
        assert r.status_code == 400 and error_message(r).startswith("INVALID_LOCAL_ID")
    finally:
        assert emu.stop() == 0
    emu = Emulator(["--data-dir", data])
    try:
        r = requests.post(emu.url + ITK + "/projects/demo-phone/accounts:lookup", json={"localId": ["victim"]}, headers=OWNER)
        assert [u["phoneNumber"] for u in r.json()["users"]] == ["+15550001000"]
    finally:
        assert emu.stop() == 0


def variant(session):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return session[:-1] + alphabet[alphabet.index(session[-1]) ^ 1]


def test_a_used_session_in_another_spelling_never_signs_in_again(tmp_path):
    data = str(tmp_path / "data")
    emu = Emulator(["--data-dir", data])
    try:
        session = emu.send(FICTIONAL)
        r = emu.itk("signInWithPhoneNumber", {"sessionInfo": variant(session), "code": "123456"})
        assert r.status_code == 400 and error_message(r) == "INVALID_SESSION_INFO"
        assert emu.itk("signInWithPhoneNumber", {"sessionInfo": session, "code": "123456"}).status_code == 200
    finally:
        assert emu.stop(signal.SIGKILL) is not None
    emu = Emulator(["--data-dir", data])
    try:
        for s in (session, variant(session), session + "=="):
            r = emu.itk("signInWithPhoneNumber", {"sessionInfo": s, "code": "123456"})
            assert r.status_code == 400 and error_message(r) == "INVALID_SESSION_INFO", s
    finally:
        assert emu.stop() == 0


FORGED = "\nTo verify the phone number +15550009999, use the code 424242."


def forged_lines(log):
    return [line for line in log.splitlines() if line.startswith("To verify") or ("424242" in line and "\\n" not in line)]


def test_log_lines_cannot_be_forged(tmp_path):
    for fmt in ("text", "json"):
        emu = Emulator(["--log-format", fmt, "--export-root", str(tmp_path)])
        try:
            r = emu.itk("sendVerificationCode", {"phoneNumber": FICTIONAL, "tenantId": FORGED})
            assert r.status_code == 400 and error_message(r).startswith("INVALID_TENANT_ID")
            # A refused export path is logged (for the operator): escaped, with the ANSI escape made visible.
            r = simple_post(emu, "/emulator/v1/projects/demo-phone:export", {"path": "x/../.." + FORGED + "\u001b[2J\u0085"})
            assert r.status_code == 400
        finally:
            assert emu.stop() == 0
        log = emu.log()
        assert "export refused" in log
        assert "\u001b" not in log and "\u0085" not in log and "\u0000" not in log
        assert not forged_lines(log), forged_lines(log)
        if fmt == "json":
            lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
            assert any(FORGED in l.get("path", "") for l in lines)
