"""A sample suite: the backend's token checks against minted test principals (`phone_auth` resets before each test)."""
import time

from firebase_admin import auth

from backend import handle


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_an_admin_may(phone_auth, firebase_app):
    token = phone_auth.mint_token("ada", role="admin")
    assert handle(firebase_app, bearer(token), admin_only=True) == (200, {"uid": "ada", "mfa": None})


def test_a_user_may_not(phone_auth, firebase_app):
    token = phone_auth.mint_token("bob", role="viewer")
    assert handle(firebase_app, bearer(token), admin_only=True)[0] == 403
    assert handle(firebase_app, bearer(token))[0] == 200


def test_second_factor_is_visible(phone_auth, firebase_app):
    token = phone_auth.mint_token("cy", email="cy@example.com", sign_in_provider="password", second_factor="phone")
    assert handle(firebase_app, bearer(token))[1]["mfa"] == "phone"


def test_revoked_and_deleted_users_are_refused(phone_auth, firebase_app):
    token = phone_auth.mint_token("dee")
    time.sleep(1.1)  # revocation is by the second (validSince)
    auth.revoke_refresh_tokens("dee", app=firebase_app)
    assert handle(firebase_app, bearer(token)) == (401, {"error": "RevokedIdTokenError"})
    token = phone_auth.mint_token("dee")
    auth.delete_user("dee", app=firebase_app)
    assert handle(firebase_app, bearer(token)) == (401, {"error": "UserNotFoundError"})


def test_no_token(phone_auth, firebase_app):
    assert handle(firebase_app, {})[0] == 401
