import os

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BINARY = os.path.join(ROOT, ".build", "release", "phone-auth-emulator")


def pytest_configure(config):
    # The runs below happen in temporary directories: point them at this checkout's release build unless told otherwise.
    os.environ.setdefault("PHONE_AUTH_EMULATOR_BIN", BINARY)
