"""The pytest plugin (entry point `pytest11`, loaded once the package is installed).

Fixtures:
- `phone_auth_emulator` (session): one emulator per test session — with pytest-xdist one per worker, each on its own
  free port — started from PHONE_AUTH_EMULATOR_BIN, `phone-auth-emulator` on PATH or ./.build/release/. While it runs,
  FIREBASE_AUTH_EMULATOR_HOST, PHONE_AUTH_EMULATOR_URL, GCLOUD_PROJECT and PHONE_AUTH_EMULATOR_PROJECT point at it, so
  `firebase_admin.initialize_app()` and the SDKs use it with no configuration.
- `phone_auth`: the same emulator, reset to its starting state before the test.

Options (command line or ini): `--phone-auth-emulator-arg=ARG` (repeatable) / ini `phone_auth_emulator_args`: server
flags (`--test-phone +15555550100=654321`, `--import ./seed`…); `--phone-auth-emulator-bin` / ini
`phone_auth_emulator_bin`: the binary.
"""
import os
import shlex

import pytest

from . import Emulator

_ENV = ("FIREBASE_AUTH_EMULATOR_HOST", "PHONE_AUTH_EMULATOR_URL", "GCLOUD_PROJECT", "PHONE_AUTH_EMULATOR_PROJECT", "PHONE_AUTH_EMULATOR_ADMIN_TOKEN")


def pytest_addoption(parser):
    group = parser.getgroup("phone-auth-emulator")
    group.addoption("--phone-auth-emulator-bin", default=None, help="the phone-auth-emulator binary")
    group.addoption("--phone-auth-emulator-arg", action="append", default=[], help="a flag for the server (repeatable)")
    parser.addini("phone_auth_emulator_bin", "the phone-auth-emulator binary", default="")
    parser.addini("phone_auth_emulator_args", "flags for the server, shell-quoted", default="")


def worker_id():
    """`gw0`, `gw1`… under pytest-xdist, `master` otherwise."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


@pytest.fixture(scope="session")
def phone_auth_emulator(request):
    config = request.config
    binary = config.getoption("--phone-auth-emulator-bin") or config.getini("phone_auth_emulator_bin") or None
    args = shlex.split(config.getini("phone_auth_emulator_args") or "") + list(config.getoption("--phone-auth-emulator-arg"))
    emu = Emulator.start(binary=binary, args=args)
    emu.worker = worker_id()
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update(emu.environment())
    try:
        yield emu
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        emu.stop()


@pytest.fixture
def phone_auth(phone_auth_emulator):
    phone_auth_emulator.reset()
    return phone_auth_emulator
