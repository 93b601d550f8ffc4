import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Email + password accounts and out-of-band codes through the responder (issue 13, the first factor MFA needs).
final class EmailPasswordTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    let clock = EmulatorClock(fixedAtMillis: testEpochMillis)

    override func setUp() { app = makeTestApp(clock: clock, seed: 13, signing: .none) }

    let owner = [("Authorization", "Bearer owner")]
    let inbox = "/emulator/v1/projects/demo-phone/oobCodes"

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/\(op)", body, headers: owner)
    }

    func claims(_ idToken: JSON?) -> JSON? {
        guard let t = idToken?.stringValue else { return nil }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(parts[1]) else { return nil }
        return try? JSONParser.parse(bytes)
    }

    @discardableResult
    func signUp(_ email: String, _ password: String) -> JSON {
        let r = itk("signUp", #"{"email":"\#(email)","password":"\#(password)","returnSecureToken":true}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return r.1
    }

    /// `emailPrivacyConfig.enableImprovedEmailPrivacy: false`: the legacy answers that say whether an email is registered.
    func legacyEmailPrivacy() {
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":false}}"#).0, 200)
    }

    func signIn(_ email: String, _ password: String) -> (Int, JSON) {
        itk("signInWithPassword", #"{"email":"\#(email)","password":"\#(password)","returnSecureToken":true}"#)
    }

    func inboxCodes(_ query: String = "") -> [JSON] { call("GET", inbox + query).1["oobCodes"]?.arrayValue ?? [] }

    // MARK: sign-up and sign-in

    func testSignUpSignInAndTokenClaims() {
        let up = signUp("Ada@Example.com", "secret1")
        XCTAssertNotNil(up["refreshToken"]?.stringValue)
        XCTAssertEqual(claims(up["idToken"])?["firebase"]?["sign_in_provider"], "password")
        let r = signIn("ada@example.com", "secret1")
        XCTAssertEqual(r.0, 200)
        XCTAssertEqual(r.1["registered"], true)
        XCTAssertEqual(r.1["localId"], up["localId"])
        XCTAssertEqual(r.1["kind"], "identitytoolkit#VerifyPasswordResponse")
        let c = claims(r.1["idToken"])
        XCTAssertEqual(c?["firebase"]?["sign_in_provider"], "password")
        XCTAssertEqual(c?["firebase"]?["identities"]?["email"], ["ada@example.com"], "stored canonical, as production and the official emulator")
        XCTAssertEqual(c?["email_verified"], false)
        // The refresh token keeps the provider.
        let refreshed = call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(r.1["refreshToken"]?.stringValue ?? "")"}"#)
        XCTAssertEqual(claims(refreshed.1["id_token"])?["firebase"]?["sign_in_provider"], "password")
    }

    func testSignUpErrors() {
        signUp("a@example.com", "secret1")
        XCTAssertEqual(message(itk("signUp", #"{"email":"A@EXAMPLE.com","password":"secret1"}"#)), "EMAIL_EXISTS")
        XCTAssertEqual(message(itk("signUp", #"{"email":"b@example.com","password":"12345"}"#)), "WEAK_PASSWORD : Password should be at least 6 characters")
        XCTAssertEqual(message(itk("signUp", #"{"email":"not-an-email","password":"secret1"}"#)), "INVALID_EMAIL")
        XCTAssertEqual(message(itk("signUp", #"{"email":"b@example.com"}"#)), "MISSING_PASSWORD")
        XCTAssertEqual(message(itk("signUp", #"{"password":"secret1"}"#)), "MISSING_EMAIL")
        // An empty body is still an anonymous sign-up.
        XCTAssertEqual(claims(itk("signUp", "{}").1["idToken"])?["firebase"]?["sign_in_provider"], "anonymous")
    }

    func testSignInErrorsDoNotTellUnknownEmailFromWrongPassword() {
        let up = signUp("c@example.com", "secret1")
        XCTAssertEqual(message(signIn("c@example.com", "wrong-password")), "INVALID_LOGIN_CREDENTIALS")
        XCTAssertEqual(message(signIn("nobody@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"c@example.com"}"#)), "MISSING_PASSWORD")
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"c@","password":"x"}"#)), "INVALID_EMAIL")
        XCTAssertEqual(message(itk("signInWithPassword", #"{"password":"x"}"#)), "MISSING_EMAIL")
        _ = admin("accounts:update", #"{"localId":"\#(up["localId"]?.stringValue ?? "")","disableUser":true}"#)
        XCTAssertEqual(message(signIn("c@example.com", "secret1")), "USER_DISABLED")
        // A user without a password (admin-created with an email only) cannot sign in with one.
        _ = admin("accounts", #"{"localId":"nopw","email":"nopw@example.com"}"#)
        XCTAssertEqual(message(signIn("nopw@example.com", "anything")), "INVALID_LOGIN_CREDENTIALS")
    }

    func testPasswordIsStoredOnlyAsASaltedHash() throws {
        let a = signUp("h1@example.com", "same-password")
        let b = signUp("h2@example.com", "same-password")
        let looked = admin("accounts:lookup", #"{"localId":["\#(a["localId"]!.stringValue!)","\#(b["localId"]!.stringValue!)"]}"#).1
        let users = try XCTUnwrap(looked["users"]?.arrayValue)
        XCTAssertEqual(users.count, 2)
        let hashes = users.compactMap { $0["passwordHash"]?.stringValue }, salts = users.compactMap { $0["salt"]?.stringValue }
        XCTAssertEqual(hashes.count, 2)
        XCTAssertEqual(Set(salts).count, 2, "each user has its own salt")
        XCTAssertEqual(Set(hashes).count, 2, "the same password hashes differently")
        XCTAssertFalse(looked.serializedString.contains("same-password"))
        XCTAssertNotNil(users[0]["passwordUpdatedAt"]?.int64Value)
        XCTAssertEqual(users[0]["providerUserInfo"]?.arrayValue?.first?["providerId"], "password")
        // The user's own lookup shows production's placeholder, no salt.
        let own = itk("lookup", #"{"idToken":"\#(a["idToken"]!.stringValue!)"}"#).1["users"]?.arrayValue?.first
        XCTAssertEqual(own?["passwordHash"], "UkVEQUNURUQ=")
        XCTAssertNil(own?["salt"])
    }

    func testRepeatedVerificationsAgreeWithPBKDF2() {
        // The quick path for a password verified before must give PBKDF2's answer every time.
        let (hash, salt) = Passwords.hash("right-one", random: SeededRandom(seed: 3))
        for _ in 0..<3 {
            XCTAssertTrue(Passwords.matches("right-one", hash: hash, salt: salt))
            XCTAssertFalse(Passwords.matches("right-onE", hash: hash, salt: salt))
            XCTAssertFalse(Passwords.matches("", hash: hash, salt: salt))
        }
        XCTAssertNotNil(Passwords.verified.withLock { $0[hash + "|" + salt] })
        // Another user with another salt and the same password is verified on its own.
        let (hash2, salt2) = Passwords.hash("right-one", random: SeededRandom(seed: 4))
        XCTAssertNotEqual(hash, hash2)
        XCTAssertTrue(Passwords.matches("right-one", hash: hash2, salt: salt2))
        XCTAssertFalse(Passwords.matches("right-one", hash: hash2, salt: salt))
    }

    func testPasswordHashFormatIsPBKDF2WithTheStoredSalt() throws {
        let up = signUp("fmt@example.com", "format-check")
        let u = try XCTUnwrap(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.users[up["localId"]!.stringValue!] })
        let salt = try XCTUnwrap(Base64URL.decode(u.salt!))
        XCTAssertEqual(salt.count, 16)
        let expected = Base64URL.encodeStandard(pbkdf2SHA256(password: Array("format-check".utf8), salt: salt, iterations: Passwords.iterations))
        XCTAssertEqual(u.passwordHash, expected)
        XCTAssertFalse(Passwords.matches("format-chec", hash: u.passwordHash, salt: u.salt))
    }

    // MARK: accounts:update

    func testPasswordChangeRevokesOlderTokensAndReturnsNewOnes() {
        let up = signUp("p@example.com", "secret1")
        _ = clock.advance(millis: 2000)
        let r = itk("update", #"{"idToken":"\#(up["idToken"]!.stringValue!)","password":"secret2","returnSecureToken":true}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNotNil(r.1["idToken"]?.stringValue)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(up["idToken"]!.stringValue!)"}"#)), "TOKEN_EXPIRED")
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(r.1["idToken"]!.stringValue!)"}"#).0, 200)
        XCTAssertEqual(message(signIn("p@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
        XCTAssertEqual(signIn("p@example.com", "secret2").0, 200)
        XCTAssertEqual(message(itk("update", #"{"idToken":"\#(r.1["idToken"]!.stringValue!)","password":"short"}"#)), "WEAK_PASSWORD : Password should be at least 6 characters")
    }

    func testEmailChangeUnverifiesAndRevokes() {
        let up = signUp("e1@example.com", "secret1")
        _ = admin("accounts:update", #"{"localId":"\#(up["localId"]!.stringValue!)","emailVerified":true}"#)
        _ = clock.advance(millis: 2000)
        let r = itk("update", #"{"idToken":"\#(up["idToken"]!.stringValue!)","email":"e2@example.com","returnSecureToken":true}"#)
        XCTAssertEqual(r.1["email"], "e2@example.com")
        XCTAssertEqual(r.1["emailVerified"], false)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(up["idToken"]!.stringValue!)"}"#)), "TOKEN_EXPIRED")
        XCTAssertEqual(claims(r.1["idToken"])?["email"], "e2@example.com")
        XCTAssertEqual(signIn("e2@example.com", "secret1").0, 200)
        XCTAssertEqual(message(signIn("e1@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
        signUp("taken@example.com", "secret1")
        XCTAssertEqual(message(itk("update", #"{"idToken":"\#(r.1["idToken"]!.stringValue!)","email":"TAKEN@example.com"}"#)), "EMAIL_EXISTS")
    }

    func testDeletePasswordAttribute() {
        let up = signUp("d@example.com", "secret1")
        XCTAssertEqual(admin("accounts:update", #"{"localId":"\#(up["localId"]!.stringValue!)","deleteAttribute":["PASSWORD"]}"#).0, 200)
        XCTAssertEqual(message(signIn("d@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
        XCTAssertNil(admin("accounts:lookup", #"{"email":["d@example.com"]}"#).1["users"]?.arrayValue?.first?["passwordHash"])
    }

    func testAdminCreateWithPasswordAndLinkToAnonymous() {
        XCTAssertEqual(admin("accounts", #"{"localId":"adm","email":"adm@example.com","password":"secret1","emailVerified":true}"#).0, 200)
        XCTAssertEqual(signIn("adm@example.com", "secret1").0, 200)
        let anon = itk("signUp", "{}").1
        let linked = itk("signUp", #"{"idToken":"\#(anon["idToken"]!.stringValue!)","email":"link@example.com","password":"secret1"}"#)
        XCTAssertEqual(linked.1["localId"], anon["localId"])
        XCTAssertEqual(claims(linked.1["idToken"])?["firebase"]?["sign_in_provider"], "password")
        XCTAssertEqual(signIn("link@example.com", "secret1").1["localId"], anon["localId"])
    }

    // MARK: createAuthUri

    func testCreateAuthUriWithEmailEnumerationProtectionSaysNothingAboutTheEmail() {
        signUp("u@example.com", "secret1")
        let known = itk("createAuthUri", #"{"identifier":"U@example.com","continueUri":"http://localhost"}"#).1
        let unknown = itk("createAuthUri", #"{"identifier":"x@example.com","continueUri":"http://localhost","sessionId":"s1"}"#).1
        XCTAssertEqual(Set(known.objectValue?.keys ?? []), ["kind", "sessionId"])
        XCTAssertEqual(unknown, ["kind": "identitytoolkit#CreateAuthUriResponse", "sessionId": "s1"])
        // A wrong password and an unknown email look the same too; a reset for an unknown email answers as for a known one.
        XCTAssertEqual(message(signIn("u@example.com", "wrong!!")), "INVALID_LOGIN_CREDENTIALS")
        XCTAssertEqual(message(signIn("x@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
        let reset = itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"X@example.com"}"#)
        XCTAssertEqual(reset.0, 200)
        XCTAssertEqual(reset.1, ["kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": "x@example.com"])
        XCTAssertTrue(inboxCodes().isEmpty, "nothing is made for an unknown email")
        // The legacy answers with the protection off.
        legacyEmailPrivacy()
        XCTAssertEqual(message(signIn("u@example.com", "wrong!!")), "INVALID_PASSWORD")
        XCTAssertEqual(message(signIn("x@example.com", "secret1")), "EMAIL_NOT_FOUND")
    }

    func testCreateAuthUri() {
        signUp("u@example.com", "secret1")
        legacyEmailPrivacy()
        let known = itk("createAuthUri", #"{"identifier":"U@example.com","continueUri":"http://localhost"}"#).1
        XCTAssertEqual(known["registered"], true)
        XCTAssertEqual(known["signinMethods"], ["password"])
        XCTAssertEqual(known["allProviders"], ["password"])
        XCTAssertEqual(known["sessionId"]?.stringValue?.count, 27)
        let unknown = itk("createAuthUri", #"{"identifier":"x@example.com","continueUri":"http://localhost","sessionId":"s1"}"#).1
        XCTAssertEqual(unknown["registered"], false)
        XCTAssertNil(unknown["signinMethods"])
        XCTAssertEqual(unknown["sessionId"], "s1")
        XCTAssertEqual(message(itk("createAuthUri", #"{"continueUri":"http://localhost"}"#)), "MISSING_IDENTIFIER")
        XCTAssertEqual(message(itk("createAuthUri", #"{"identifier":"x@example.com"}"#)), "MISSING_CONTINUE_URI")
        XCTAssertEqual(message(itk("createAuthUri", #"{"identifier":"x","continueUri":"http://localhost"}"#)), "INVALID_IDENTIFIER")
        XCTAssertEqual(message(itk("createAuthUri", #"{"identifier":"x@example.com","continueUri":"localhost"}"#)), "INVALID_CONTINUE_URI")
        // An empty providerId is an absent one (proto3), not a provider flow.
        XCTAssertEqual(message(itk("createAuthUri", #"{"identifier":"","continueUri":"","providerId":""}"#)), "MISSING_IDENTIFIER")
    }

    /// With a `providerId` (found by fuzzing the OpenAPI document: it answered 501): the provider page's URL, as
    /// production answers the identity provider's, never a 5xx.
    func testCreateAuthUriForAProvider() throws {
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:createAuthUri?key=k1",
                     #"{"providerId":"Google.com","continueUri":"http://localhost/back?x=1","sessionId":"s9"}"#, headers: [("Host", "127.0.0.1:9099")])
        XCTAssertEqual(r.0, 200)
        XCTAssertEqual(r.1["providerId"], "google.com")
        XCTAssertEqual(r.1["sessionId"], "s9")
        XCTAssertEqual(r.1["authUri"], "http://127.0.0.1:9099/emulator/auth/handler?apiKey=k1&providerId=google.com&authType=signInViaRedirect&redirectUrl=http%3A%2F%2Flocalhost%2Fback%3Fx%3D1&sessionId=s9")
        XCTAssertEqual(message(itk("createAuthUri", #"{"providerId":"google.com"}"#)), "MISSING_CONTINUE_URI")
        XCTAssertEqual(message(itk("createAuthUri", #"{"providerId":"google.com","continueUri":"nope"}"#)), "INVALID_CONTINUE_URI")
        XCTAssertEqual(itk("createAuthUri", #"{"providerId":"bad provider","continueUri":"http://localhost"}"#).0, 400)
    }

    // MARK: out-of-band codes

    func testVerifyEmailThroughTheInbox() throws {
        let up = signUp("v@example.com", "secret1")
        let sent = itk("sendOobCode", #"{"requestType":"VERIFY_EMAIL","idToken":"\#(up["idToken"]!.stringValue!)"}"#)
        XCTAssertEqual(sent.1, ["kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": "v@example.com"])
        let codes = inboxCodes()
        XCTAssertEqual(codes.count, 1)
        let entry = try XCTUnwrap(codes.first?.objectValue)
        XCTAssertEqual(Set(entry.keys), ["email", "oobCode", "oobLink", "requestType"])
        XCTAssertEqual(entry["requestType"], "VERIFY_EMAIL")
        let code = try XCTUnwrap(entry["oobCode"]?.stringValue)
        XCTAssertEqual(code.count, Emulator.oobCodeLength)
        XCTAssertTrue(entry["oobLink"]!.stringValue!.contains("/emulator/action?mode=verifyEmail&lang=en&oobCode=\(code)&apiKey=fake-api-key"))
        let applied = itk("update", #"{"oobCode":"\#(code)"}"#)
        XCTAssertEqual(applied.0, 200)
        XCTAssertEqual(applied.1["emailVerified"], true)
        XCTAssertEqual(message(itk("update", #"{"oobCode":"\#(code)"}"#)), "INVALID_OOB_CODE")
        XCTAssertTrue(inboxCodes().isEmpty, "a used code leaves the inbox")
        XCTAssertEqual(claims(signIn("v@example.com", "secret1").1["idToken"])?["email_verified"], true)
    }

    func testPasswordResetFlow() throws {
        signUp("r@example.com", "secret1")
        legacyEmailPrivacy()
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"none@example.com"}"#)), "EMAIL_NOT_FOUND")
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET"}"#)), "MISSING_EMAIL")
        XCTAssertEqual(message(itk("sendOobCode", #"{"email":"r@example.com"}"#)), "MISSING_REQ_TYPE")
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"R@example.com"}"#).0, 200)
        let code = try XCTUnwrap(inboxCodes("?email=r@example.com").first?["oobCode"]?.stringValue)
        // Applying a reset code as an action code is refused and leaves it usable.
        XCTAssertEqual(message(itk("update", #"{"oobCode":"\#(code)"}"#)), "INVALID_OOB_CODE")
        let checked = itk("resetPassword", #"{"oobCode":"\#(code)"}"#).1
        XCTAssertEqual(checked["email"], "r@example.com")
        XCTAssertEqual(checked["requestType"], "PASSWORD_RESET")
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"12345"}"#)), "WEAK_PASSWORD : Password should be at least 6 characters")
        XCTAssertEqual(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"secret2"}"#).0, 200)
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"secret3"}"#)), "INVALID_OOB_CODE")
        XCTAssertEqual(message(signIn("r@example.com", "secret1")), "INVALID_PASSWORD", "the legacy code with email enumeration protection off")
        XCTAssertEqual(signIn("r@example.com", "secret2").0, 200)
        XCTAssertEqual(message(itk("resetPassword", "{}")), "MISSING_OOB_CODE")
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"nope"}"#)), "INVALID_OOB_CODE")
    }

    func testCodesExpireOnTheEmulatorClock() throws {
        signUp("x@example.com", "secret1")
        _ = itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"x@example.com"}"#)
        let code = try XCTUnwrap(inboxCodes().first?["oobCode"]?.stringValue)
        _ = clock.advance(millis: 3_600_000)
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"secret2"}"#)), "EXPIRED_OOB_CODE")
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"secret2"}"#)), "INVALID_OOB_CODE")
        XCTAssertEqual(signIn("x@example.com", "secret1").0, 200)
    }

    func testVerifyAndChangeEmail() throws {
        let up = signUp("old@example.com", "secret1")
        signUp("busy@example.com", "secret1")
        let t = up["idToken"]!.stringValue!
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"VERIFY_AND_CHANGE_EMAIL","idToken":"\#(t)"}"#)), "MISSING_NEW_EMAIL")
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"VERIFY_AND_CHANGE_EMAIL","idToken":"\#(t)","newEmail":"busy@example.com"}"#)), "EMAIL_EXISTS")
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"VERIFY_AND_CHANGE_EMAIL","idToken":"\#(t)","newEmail":"New@example.com"}"#).0, 200)
        let entry = try XCTUnwrap(inboxCodes().first)
        XCTAssertEqual(entry["newEmail"], "new@example.com")
        let applied = itk("update", #"{"oobCode":"\#(entry["oobCode"]!.stringValue!)"}"#).1
        XCTAssertEqual(applied["email"], "new@example.com")
        XCTAssertEqual(applied["emailVerified"], true)
        XCTAssertEqual(signIn("new@example.com", "secret1").0, 200)
        XCTAssertEqual(message(signIn("old@example.com", "secret1")), "INVALID_LOGIN_CREDENTIALS")
    }

    /// An email change the user makes sends the old address a RECOVER_EMAIL code (accounts:update, and the apply of a
    /// VERIFY_AND_CHANGE_EMAIL code); applying it restores the old address, verified; `initialEmail` keeps the first.
    /// An admin's change and an anonymous session's send none; nobody can ask for one.
    func testEmailChangeSendsARecoveryCodeThatRestoresTheOldAddress() throws {
        let up = signUp("first@example.com", "secret1")
        let uid = try XCTUnwrap(up["localId"]?.stringValue)
        let changed = itk("update", #"{"idToken":"\#(up["idToken"]!.stringValue!)","email":"second@example.com","returnSecureToken":true}"#)
        XCTAssertEqual(changed.0, 200, "\(changed.1)")
        let recovery = try XCTUnwrap(inboxCodes().first)
        XCTAssertEqual(inboxCodes().count, 1)
        XCTAssertEqual(recovery["requestType"], "RECOVER_EMAIL")
        XCTAssertEqual(recovery["email"], "first@example.com")
        XCTAssertEqual(recovery["newEmail"], "second@example.com")
        XCTAssertTrue(recovery["oobLink"]?.stringValue?.contains("mode=recoverEmail") == true)
        let code = try XCTUnwrap(recovery["oobCode"]?.stringValue)
        // checkActionCode: the address it restores and the one it leaves (the JS SDK's `email` / `previousEmail`).
        let checked = itk("resetPassword", #"{"oobCode":"\#(code)"}"#).1
        XCTAssertEqual(checked["requestType"], "RECOVER_EMAIL")
        XCTAssertEqual(checked["email"], "first@example.com")
        XCTAssertEqual(checked["newEmail"], "second@example.com")
        // Nobody can ask for one.
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"RECOVER_EMAIL","email":"first@example.com"}"#))?.hasPrefix("INVALID_REQ_TYPE"), true)
        let user = { () -> JSON? in self.admin("accounts:lookup", #"{"localId":["\#(uid)"]}"#).1["users"]?.arrayValue?.first }
        XCTAssertEqual(user()?["initialEmail"], "first@example.com")
        let restored = itk("update", #"{"oobCode":"\#(code)"}"#)
        XCTAssertEqual(restored.0, 200, "\(restored.1)")
        XCTAssertEqual(restored.1["email"], "first@example.com")
        XCTAssertEqual(restored.1["emailVerified"], true)
        XCTAssertEqual(message(itk("update", #"{"oobCode":"\#(code)"}"#)), "INVALID_OOB_CODE", "used up")
        XCTAssertEqual(signIn("first@example.com", "secret1").0, 200)
        XCTAssertEqual(user()?["initialEmail"], "first@example.com")
        XCTAssertTrue(inboxCodes().isEmpty, "restoring sends nothing")
        // VERIFY_AND_CHANGE_EMAIL: its apply sends the old address the recovery code.
        let t = try XCTUnwrap(signIn("first@example.com", "secret1").1["idToken"]?.stringValue)
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"VERIFY_AND_CHANGE_EMAIL","idToken":"\#(t)","newEmail":"third@example.com"}"#).0, 200)
        let verify = try XCTUnwrap(inboxCodes().first?["oobCode"]?.stringValue)
        XCTAssertEqual(itk("update", #"{"oobCode":"\#(verify)"}"#).0, 200)
        XCTAssertEqual(inboxCodes().map { $0["requestType"]?.stringValue ?? "" }, ["RECOVER_EMAIL"])
        XCTAssertEqual(inboxCodes().first?["email"], "first@example.com")
        // Taken meanwhile: EMAIL_EXISTS, and the account keeps its new address.
        signUp("first@example.com", "secret2")
        let again = try XCTUnwrap(inboxCodes().first?["oobCode"]?.stringValue)
        XCTAssertEqual(message(itk("update", #"{"oobCode":"\#(again)"}"#)), "EMAIL_EXISTS")
        XCTAssertEqual(user()?["email"], "third@example.com")
        // An admin's change sends nothing (initialEmail stays the first address).
        XCTAssertEqual(call("DELETE", inbox).0, 200)
        XCTAssertEqual(admin("accounts:update", #"{"localId":"\#(uid)","email":"fourth@example.com"}"#).0, 200)
        XCTAssertTrue(inboxCodes().isEmpty)
        XCTAssertEqual(user()?["initialEmail"], "first@example.com")
        // An anonymous session gaining an email sends nothing and keeps no initialEmail.
        let anon = itk("signUp", "{}").1
        XCTAssertEqual(itk("update", #"{"idToken":"\#(anon["idToken"]!.stringValue!)","email":"anon@example.com"}"#).0, 200)
        XCTAssertTrue(inboxCodes().isEmpty)
        XCTAssertNil(admin("accounts:lookup", #"{"localId":["\#(anon["localId"]!.stringValue!)"]}"#).1["users"]?.arrayValue?.first?["initialEmail"])
    }

    func testReturnOobLinkIsAdminOnly() throws {
        signUp("l@example.com", "secret1")
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"l@example.com","returnOobLink":true}"#)), "INSUFFICIENT_PERMISSION")
        let r = admin("accounts:sendOobCode", #"{"requestType":"VERIFY_EMAIL","email":"l@example.com","returnOobLink":true,"continueUrl":"https://app.example/done?x=1"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let link = try XCTUnwrap(r.1["oobLink"]?.stringValue)
        XCTAssertTrue(link.contains("oobCode=\(r.1["oobCode"]!.stringValue!)"))
        XCTAssertTrue(link.contains("continueUrl=https%3A%2F%2Fapp.example%2Fdone%3Fx%3D1"), link)
        XCTAssertEqual(message(admin("accounts:sendOobCode", #"{"requestType":"VERIFY_EMAIL","email":"no@example.com","returnOobLink":true}"#)), "USER_NOT_FOUND")
        XCTAssertEqual(message(admin("accounts:sendOobCode", #"{"requestType":"VERIFY_EMAIL","email":"l@example.com","continueUrl":"nope"}"#)),
                       "INVALID_CONTINUE_URI : ((expected an absolute URI with valid scheme and host))")
        XCTAssertEqual(message(itk("sendOobCode", #"{"requestType":"VERIFY_EMAIL"}"#)), "MISSING_ID_TOKEN")
    }

    /// The admin Config resource's `emailPrivacyConfig` is the switch sign-in and sendOobCode obey (it was stored
    /// and shown, but not applied; the official emulator's specs turn protection on there).
    func testTheAdminConfigsEmailPrivacyIsTheOneInForce() {
        let v2 = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"
        XCTAssertEqual(call("GET", v2, headers: owner).1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": true])
        let send = { self.message(self.itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"none@example.com"}"#)) }
        XCTAssertNil(send(), "protected: an unknown email is answered as a known one")
        let off = call("PATCH", v2 + "?updateMask=emailPrivacyConfig", #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":false}}"#, headers: owner)
        XCTAssertEqual(off.1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": false])
        XCTAssertEqual(send(), "EMAIL_NOT_FOUND")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/config").1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": false])
        // Without a mask the body merges; a masked path absent from the body is cleared (the field's default, off).
        XCTAssertEqual(call("PATCH", v2, #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":true}}"#, headers: owner).0, 200)
        XCTAssertNil(send())
        XCTAssertEqual(call("PATCH", v2 + "?updateMask=displayName", #"{"displayName":"x"}"#, headers: owner).1["emailPrivacyConfig"],
                       ["enableImprovedEmailPrivacy": true], "another field's patch leaves it")
        XCTAssertEqual(call("PATCH", v2 + "?updateMask=emailPrivacyConfig", "{}", headers: owner).1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": false])
        XCTAssertEqual(send(), "EMAIL_NOT_FOUND")
        let bad = call("PATCH", v2, #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":"yes"}}"#, headers: owner)
        XCTAssertEqual(bad.0, 400)
        XCTAssertEqual(message(bad), "Invalid config: emailPrivacyConfig.enableImprovedEmailPrivacy: must be true or false, not string")
        XCTAssertEqual(send(), "EMAIL_NOT_FOUND", "a refused patch changes nothing")
    }

    /// oob.spec: a tenant with auth disabled answers resetPassword PROJECT_DISABLED before anything else (it said
    /// MISSING_OOB_CODE), then PASSWORD_LOGIN_DISABLED where passwords are off.
    func testResetPasswordInADisabledTenant() throws {
        let tenants = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"
        let closed = try XCTUnwrap(call("POST", tenants, #"{"displayName":"closed","disableAuth":true}"#, headers: owner).1["tenantId"]?.stringValue)
        let nopw = try XCTUnwrap(call("POST", tenants, #"{"displayName":"nopw","allowPasswordSignup":false}"#, headers: owner).1["tenantId"]?.stringValue)
        XCTAssertEqual(message(itk("resetPassword", #"{"tenantId":"\#(closed)"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("resetPassword", #"{"tenantId":"\#(closed)","oobCode":"x","newPassword":"secret2"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("resetPassword", #"{"tenantId":"\#(nopw)"}"#)), "PASSWORD_LOGIN_DISABLED")
    }

    func testInboxFilterDeleteAndReadsNeverCreateStores() throws {
        signUp("i1@example.com", "secret1")
        signUp("i2@example.com", "secret1")
        for e in ["i1@example.com", "i2@example.com", "i1@example.com"] {
            XCTAssertEqual(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"\#(e)"}"#).0, 200)
        }
        XCTAssertEqual(inboxCodes().map { $0["email"]?.stringValue ?? "" }, ["i1@example.com", "i2@example.com", "i1@example.com"])
        XCTAssertEqual(inboxCodes("?email=I1@example.com").count, 2)
        XCTAssertEqual(call("GET", inbox + "?email=bad").0, 400)
        XCTAssertEqual(call("DELETE", inbox + "?email=i1@example.com").1["deleted"]?.int64Value, 2)
        XCTAssertEqual(inboxCodes().count, 1)
        XCTAssertEqual(call("DELETE", inbox).1["deleted"]?.int64Value, 1)
        XCTAssertTrue(inboxCodes().isEmpty)
        let before = Set(app.emulator.storeKeys)
        XCTAssertEqual(call("GET", "/emulator/v1/projects/never-used/oobCodes").1, ["oobCodes": []])
        XCTAssertEqual(call("GET", "/emulator/v1/projects/never-used/tenants/t1/oobCodes?email=a@example.com").1, ["oobCodes": []])
        XCTAssertEqual(Set(app.emulator.storeKeys), before)
    }

    func testWaitAnswersAtOnceWhenACodeIsPending() throws {
        signUp("w@example.com", "secret1")
        _ = itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"w@example.com"}"#)
        let got = Locked<OobCode?>(nil)
        let waiter = try app.emulator.waitForOobCode(StoreKey(projectId: "demo-phone"), email: "W@example.com", timeoutSeconds: 5) { c in got.withLock { $0 = c } }
        XCTAssertNil(waiter, "answered at once, nothing registered")
        XCTAssertEqual(got.withLock { $0?.requestType }, .passwordReset)
        XCTAssertEqual(call("GET", inbox + ":wait").0, 400)
        XCTAssertEqual(call("GET", inbox + ":wait?email=w@example.com&timeoutSeconds=301").0, 400)
    }

    func testWaiterIsAnsweredByTheNextCodeAndCancelledOnClose() throws {
        signUp("q@example.com", "secret1")
        let key = StoreKey(projectId: "demo-phone")
        let got = Locked<OobCode?>(nil)
        let done = expectation(description: "answered")
        try app.emulator.waitForOobCode(key, email: "Q@example.com", timeoutSeconds: 30) { c in got.withLock { $0 = c }; done.fulfill() }
        XCTAssertEqual(app.emulator.pendingOobWaiters(key), 1)
        _ = itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"q@example.com"}"#)
        wait(for: [done], timeout: 5)
        XCTAssertEqual(got.withLock { $0?.email }, "q@example.com")
        XCTAssertEqual(app.emulator.pendingOobWaiters(key), 0)
        let waiter = try XCTUnwrap(try app.emulator.waitForOobCode(key, email: "other@example.com", timeoutSeconds: 30) { _ in XCTFail("cancelled") })
        XCTAssertEqual(app.emulator.pendingOobWaiters(key), 1)
        waiter.cancel()
        XCTAssertEqual(app.emulator.pendingOobWaiters(key), 0)
    }

    func testCodesPerStoreAreCappedOldestFirst() throws {
        let key = StoreKey(projectId: "demo-phone")
        signUp("cap@example.com", "secret1")
        var first: String? = nil
        for i in 0..<(OobTable.capacity + 3) {
            let c = try app.emulator.createOobCode(key, email: "cap@example.com", newEmail: nil, type: .passwordReset, link: { "l/\($0)" })
            if i == 0 { first = c.code }
        }
        XCTAssertEqual(app.emulator.oobCodes(key, email: nil).count, OobTable.capacity)
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(first!)"}"#)), "INVALID_OOB_CODE")
    }

    // MARK: import

    func testImportedPasswordsKeepSigningIn() {
        // The official emulator's export format, its import field, and our own export of a user.
        let ours = signUp("ours@example.com", "secret-ours")
        let exported = call("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?maxResults=-1", headers: owner).1
        let mine = exported["users"]!.arrayValue!.first { $0["localId"] == ours["localId"] }!
        let other = makeTestApp(seed: 99, signing: .none)
        let official: JSON = ["localId": "off1", "email": "official@example.com",
                              "passwordHash": "fakeHash:salt=fakeSaltAbc:password=secret-official", "salt": "fakeSaltAbc"]
        let raw: JSON = ["localId": "raw1", "email": "raw@example.com", "rawPassword": "secret-raw"]
        let body: JSON = .object(["users": .array([official, raw, mine])])
        let saved = app
        app = other
        let r = admin("accounts:batchCreate", body.serializedString)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNil(r.1["error"])
        XCTAssertEqual(signIn("official@example.com", "secret-official").0, 200)
        XCTAssertEqual(signIn("raw@example.com", "secret-raw").0, 200)
        XCTAssertEqual(signIn("ours@example.com", "secret-ours").0, 200)
        XCTAssertEqual(message(signIn("official@example.com", "fakeHash:salt=fakeSaltAbc:password=secret-official")), "INVALID_LOGIN_CREDENTIALS")
        let stored = admin("accounts:lookup", #"{"localId":["off1"]}"#).1.serializedString
        XCTAssertFalse(stored.contains("secret-official"), "the official format's clear password is re-hashed, not kept")
        app = saved
    }

    // MARK: legacy paths

    func testLegacyV3Paths() {
        signUp("ios@example.com", "secret1")
        let v3 = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
        let r = call("POST", v3 + "verifyPassword?key=k", #"{"email":"ios@example.com","password":"secret1","returnSecureToken":true}"#)
        XCTAssertEqual(r.0, 200)
        XCTAssertEqual(r.1["kind"], "identitytoolkit#VerifyPasswordResponse")
        legacyEmailPrivacy()
        XCTAssertEqual(call("POST", v3 + "createAuthUri?key=k", #"{"identifier":"ios@example.com","continueUri":"http://localhost"}"#).1["registered"], true)
        XCTAssertEqual(call("POST", v3 + "getOobConfirmationCode?key=k", #"{"requestType":"PASSWORD_RESET","email":"ios@example.com"}"#).0, 200)
        let code = inboxCodes().first?["oobCode"]?.stringValue ?? ""
        XCTAssertEqual(call("POST", v3 + "resetPassword?key=k", #"{"oobCode":"\#(code)"}"#).1["requestType"], "PASSWORD_RESET")
        XCTAssertEqual(call("GET", v3 + "getProjectConfig?key=k").0, 200)
    }
}
