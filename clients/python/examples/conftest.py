import firebase_admin
import pytest

from backend import app_for_tests


@pytest.fixture(scope="session")
def firebase_app(phone_auth_emulator):
    app = app_for_tests()
    yield app
    firebase_admin.delete_app(app)
