"""A tiny backend under test: an `Authorization: Bearer <ID token>` check with firebase-admin, as a real service does it
(revoked, disabled and deleted users refused), and an admin-only operation that reads a custom claim."""
import firebase_admin
from firebase_admin import auth


def handle(app, headers, admin_only=False):
    """(status, body) for a request with these headers."""
    value = headers.get("Authorization", "")
    if not value.startswith("Bearer "):
        return 401, {"error": "missing token"}
    try:
        claims = auth.verify_id_token(value[len("Bearer "):], app=app, check_revoked=True)
    except (auth.RevokedIdTokenError, auth.UserDisabledError, auth.UserNotFoundError, auth.InvalidIdTokenError) as e:
        return 401, {"error": type(e).__name__}
    if admin_only and claims.get("role") != "admin":
        return 403, {"error": "admins only"}
    return 200, {"uid": claims["uid"], "mfa": claims["firebase"].get("sign_in_second_factor")}


def app_for_tests():
    """firebase-admin with no arguments: the pytest plugin exported FIREBASE_AUTH_EMULATOR_HOST and GCLOUD_PROJECT."""
    return firebase_admin.initialize_app(name=f"backend-{id(object())}")
