import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// Who may call a route.
enum Access: Sendable {
    /// API key (`?key=` / `x-goog-api-key`) or admin Bearer.
    case client
    /// API key only (Secure Token).
    case apiKey
    /// `Authorization: Bearer owner` only.
    case admin
    /// Client or admin; a path project needs admin (`INSUFFICIENT_PERMISSION` otherwise).
    case adminPath
    /// No credentials (keys, status).
    case open
    /// The emulator API (`/emulator/…`, export included): open, like the official emulator, unless `--admin-token`
    /// is set (then `Bearer <token>` only).
    case emulator

    /// Protected from other web origins (see `WebBoundary`): the emulator API and admin routes.
    var isProtected: Bool {
        switch self {
        case .admin, .adminPath, .emulator: true
        case .client, .apiKey, .open: false
        }
    }

    /// docs/endpoints.md's "credentials" column.
    var summary: String {
        switch self {
        case .client: "API key or admin"
        case .apiKey: "API key"
        case .admin, .adminPath: "admin"
        case .emulator: "none (`--admin-token`: that token)"
        case .open: "none"
        }
    }
}

enum BodyKind: Sendable { case none, json, jsonOrForm }

/// Where a handler runs.
enum Execution: Sendable {
    /// On the event loop.
    case loop
    /// Signs tokens. With RS256 signing, not while the loop serves the requests at hand: it runs later, as a job of
    /// the same event loop between its polls (`ResponseContext.runOnLoop`: no thread hand-off, no context switch),
    /// or on the signing pool when the loop's job queue is full or no key exists yet.
    case offload
    /// On the event loop while the work is cheap: a handler that is about to do costly work (sign a token, hash a
    /// password) before it has changed anything calls `Call.beforeCostlyWork()`, and with RS256 signing the request
    /// runs again from the start where `.offload` work runs. (An MFA password sign-in signs nothing: it stays on the loop and
    /// saves two thread hand-offs.)
    case adaptive
    /// Bulk work (batch deletes and imports, wipes, full listings, export, key generation): on the worker pool in every signing mode,
    /// so one large request never holds an event loop.
    case bulk
}

typealias Handler = @Sendable (PhoneAuthApp, Call) throws -> Reply

/// The parameters a path template can name, percent-decoded. Stored as the few pairs a route has (most client calls:
/// none, no allocation), so a routed request and its `Call` stay small to copy.
struct PathParams: Sendable, Equatable {
    enum Name: String, Sendable, CaseIterable { case project, tenant, file, snapshot, config, app }

    private var pairs: [(name: Name, value: String)] = []

    init(project: String? = nil, tenant: String? = nil, file: String? = nil, snapshot: String? = nil, config: String? = nil,
         app: String? = nil) {
        self.project = project
        self.tenant = tenant
        self.file = file
        self.snapshot = snapshot
        self.config = config
        self.app = app
    }

    static func == (a: PathParams, b: PathParams) -> Bool {
        Name.allCases.allSatisfy { a[$0] == b[$0] }
    }

    subscript(name: Name) -> String? {
        get {
            for p in pairs where p.name == name { return p.value }
            return nil
        }
        set {
            if let i = pairs.firstIndex(where: { $0.name == name }) {
                if let newValue { pairs[i].value = newValue } else { pairs.remove(at: i) }
            } else if let newValue {
                pairs.append((name, newValue))
            }
        }
    }

    /// `{project}`.
    var project: String? { get { self[.project] } set { self[.project] = newValue } }
    /// `{tenant}`; `{tenant?}` also matches an empty segment, read as no tenant (the top-level project).
    var tenant: String? { get { self[.tenant] } set { self[.tenant] = newValue } }
    /// `{file}`: a console or provider page file's name.
    var file: String? { get { self[.file] } set { self[.file] = newValue } }
    /// `{snapshot}`: a snapshot's name (checked by its handler).
    var snapshot: String? { get { self[.snapshot] } set { self[.snapshot] = newValue } }
    /// `{config}`: a provider configuration's id (checked by its handler).
    var config: String? { get { self[.config] } set { self[.config] = newValue } }
    /// `{app}`: a Firebase app id (App Check; checked by its handler).
    var app: String? { get { self[.app] } set { self[.app] = newValue } }
}

/// One row of the route table: everything there is to know about an endpoint except its handler's body.
/// A class: a routed request carries its row by reference (one pointer, not the row's dozen fields copied per request).
final class RouteRow: Sendable {
    /// `GET`, `POST`, `PATCH` or `DELETE` (`HEAD` is served by the `GET` row).
    let method: String
    /// Segments separated by `/`: literals, or a parameter `{project}` / `{tenant}` (non-empty), `{tenant?}` (may be
    /// empty), optionally followed by a literal suffix (`{project}:export`). At most one optional group `[/…]`.
    /// Literals are compared with the request's percent-decoded segments.
    let template: String
    let access: Access
    let body: BodyKind
    let run: Execution
    /// The iOS SDK's v3 name: the row is also served at `/www.googleapis.com/identitytoolkit/v3/relyingparty/<v3>`,
    /// where `Route.legacy` is set (replies carry `kind`).
    let v3: String?
    /// Never creates a project or tenant: a path project or tenant (or a body `tenantId`, through
    /// `Call.readStoreKey`) that does not exist reads as an empty one. Every `GET` row is read-only; a `POST` row that
    /// only reads (lookups, queries) says so with `readOnly: true`.
    let readOnly: Bool
    /// What the endpoint does: docs/endpoints.md's table is generated from these (see `RouteTable.markdown`).
    let doc: String
    /// A v2 admin resource (`/v2/projects/{p}/tenants…`, a project's or tenant's provider configurations): its handler
    /// answers `TENANT_NOT_FOUND` for a missing path tenant, so the path tenant is never created on first use.
    var isTenantResource: Bool { template.hasPrefix("/identitytoolkit.googleapis.com/v2/projects/{project}") }
    let handler: Handler
    /// A client call of Identity Toolkit or Secure Token: App Check (`appCheck.enforcement`) applies to it.
    let appCheckProtected: Bool
    /// The template's last segment (`accounts:signInWithPhoneNumber`): how events name the call.
    let operation: Substring

    init(_ method: String, _ template: String, _ access: Access, _ body: BodyKind, _ run: Execution, v3: String? = nil,
         readOnly: Bool = false, _ doc: String, _ handler: @escaping Handler) {
        self.method = method
        self.template = template
        self.access = access
        self.body = body
        self.run = run
        self.v3 = v3
        self.readOnly = readOnly || method == "GET"
        self.doc = doc
        self.handler = handler
        appCheckProtected = (access == .client || access == .apiKey)
            && (template.hasPrefix("/identitytoolkit.googleapis.com/") || template.hasPrefix("/securetoken.googleapis.com/"))
        operation = template.split(separator: "/").last ?? ""
    }

    static let legacyPrefix = "/www.googleapis.com/identitytoolkit/v3/relyingparty/"
}

/// A routed request: its row, the typed path parameters, and whether it came by a legacy v3 path.
struct Route: Sendable {
    let row: RouteRow
    let params: PathParams
    /// Legacy v3 path (iOS): replies carry `kind`.
    let legacy: Bool

    var access: Access { row.access }
    var body: BodyKind { row.body }
    var run: Execution { row.run }
    var readOnly: Bool { row.readOnly }
    var handler: Handler { row.handler }
}

enum Router {
    enum Match {
        case route(Route)
        case methodNotAllowed
        case notFound
    }

    /// Every endpoint, one row each. Adding an endpoint: a row here (then `scripts/readme-endpoints` for the README),
    /// a handler, its tests.
    static let rows: [RouteRow] = [
        // Client API (Identity Toolkit v1, Secure Token), v3 names for the iOS SDK's legacy paths.
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", .client, .json, .loop, v3: "sendVerificationCode",
                 "start a verification, `{sessionInfo}`", SendVerificationCode.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber", .client, .json, .offload, v3: "verifyPhoneNumber",
                 "sign in / sign up; link and re-auth with `idToken`; `temporaryProof` conflicts", SignInWithPhoneNumber.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:lookup", .client, .json, .offload, v3: "getAccountInfo", readOnly: true,
                 "the user of an `idToken` (admin: by `localId[]`, `phoneNumber[]`, `email[]`)", Lookup.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp", .client, .json, .offload, v3: "signupNewUser",
                 "anonymous users; email + password accounts (with `idToken`: link them)", SignUp.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:update", .client, .json, .offload, v3: "setAccountInfo",
                 "profile changes, `deleteProvider: [\"phone\"]`, `password`, `email` (the old address gets a RECOVER_EMAIL code, `initialEmail` keeps the first); `{oobCode}` applies an action code (VERIFY_EMAIL, VERIFY_AND_CHANGE_EMAIL, RECOVER_EMAIL)", UpdateAccount.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:delete", .client, .json, .offload, v3: "deleteAccount",
                 "self-delete (with `idToken`)", DeleteAccount.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:verifyClient", .client, .json, .loop, v3: "verifyClient",
                 "iOS app verification: `{receipt, suggestedTimeout}`", VerifyClient.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword", .client, .json, .adaptive, v3: "verifyPassword",
                 "email + password sign-in (`INVALID_LOGIN_CREDENTIALS`)", SignInWithPassword.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:createAuthUri", .client, .json, .loop, v3: "createAuthUri",
                 "`{sessionId}` for any email; `{registered, allProviders, signinMethods, sessionId}` with email enumeration protection off", CreateAuthUri.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendOobCode", .client, .json, .loop, v3: "getOobConfirmationCode",
                 "VERIFY_EMAIL, PASSWORD_RESET, VERIFY_AND_CHANGE_EMAIL, EMAIL_SIGNIN codes (logged and in the oob inbox; no email is sent; beforeSendEmail first); admin `returnOobLink`", SendOobCode.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:resetPassword", .client, .json, .offload, v3: "resetPassword",
                 "`{oobCode, newPassword}` sets the password; without `newPassword` checks the code", ResetPassword.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken", .client, .json, .offload, v3: "verifyCustomToken",
                 "sign in / sign up with a custom token (unsigned or RS256, signature not checked); `claims` go into the ID tokens", CustomTokens.signIn),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithIdp", .client, .json, .offload, v3: "verifyAssertion",
                 "federated sign-in / sign-up / link (`idToken`): `postBody` `providerId=…&id_token=…` (JSON claims or a JWT, not verified), `access_token`, `nonce`, SAML (its attribute statements in that sign-in's ID token as `firebase.sign_in_attributes`)", SignInWithIdp.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithEmailLink", .client, .json, .offload, v3: "emailLinkSignin",
                 "sign in / sign up / link (`idToken`) with an EMAIL_SIGNIN code: `{email, oobCode}`", SignInWithEmailLink.handle),
        RouteRow("GET", "/www.googleapis.com/identitytoolkit/v3/relyingparty/getProjectConfig", .client, .none, .loop,
                 "the iOS SDK's project config (`projectId`, `authorizedDomains`)", Status.projects),
        RouteRow("POST", "/securetoken.googleapis.com/v1/token", .apiKey, .jsonOrForm, .offload,
                 "refresh; form or JSON; new ID token in `access_token` and `id_token`", SecureToken.grant),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v1/recaptchaParams", .client, .none, .loop,
                 "the old reCAPTCHA parameters (a fake site key)", RecaptchaConfig.legacyParams),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v1/projects", .client, .none, .loop,
                 "project number and `authorizedDomains`", Status.projects),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig", .client, .none, .loop,
                 "the project's or tenant's `recaptchaConfig` as the SDKs read it (`?clientType=&version=&tenantId=`; PHONE_PROVIDER `OFF`/`AUDIT`/`ENFORCE`)", RecaptchaConfig.handle),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/passwordPolicy", .client, .none, .loop,
                 "the project's or tenant's password policy as the SDKs read it (`validatePassword`; `?tenantId=`)", PasswordPolicyEndpoint.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts:revokeToken", .client, .json, .loop,
                 "revoke the signed-in user's Apple token (`idToken`, `providerId: apple.com`, `tokenType`, `token`, `redirectUri` for CODE): `{}` and an `idpToken.revoked` event; no Apple is called", RevokeToken.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start", .client, .json, .loop,
                 "SMS second factor: send an enrollment code (`phoneEnrollmentInfo`), `{phoneSessionInfo}`", MFAEndpoints.enrollmentStart),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:finalize", .client, .json, .offload,
                 "enroll with the code (`phoneVerificationInfo`); tokens with the second factor", MFAEndpoints.enrollmentFinalize),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:withdraw", .client, .json, .offload,
                 "unenroll (`mfaEnrollmentId`); fresh tokens", MFAEndpoints.withdraw),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:start", .client, .json, .loop,
                 "send a sign-in code to an enrolled number (`mfaPendingCredential`, `mfaEnrollmentId`), `{phoneResponseInfo}`",
                 MFAEndpoints.signInStart),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize", .client, .json, .offload,
                 "finish the sign-in with the code; tokens with `sign_in_second_factor`", MFAEndpoints.signInFinalize),

        // Admin API (`Bearer owner`). An empty tenant (`tenants//…`, as firebase-tools import sends) is the top-level project.
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts", .adminPath, .json, .loop,
                 "create a user", SignUp.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:lookup", .adminPath, .json, .offload, readOnly: true,
                 "users by `localId[]`, `phoneNumber[]`, `email[]`", Lookup.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:update", .adminPath, .json, .offload,
                 "update a user (claims, `disableUser`, `validSince`, …)", UpdateAccount.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:delete", .adminPath, .json, .offload,
                 "delete a user", DeleteAccount.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:sendOobCode", .adminPath, .json, .loop,
                 "email action links (`returnOobLink: true` answers `oobLink`, `oobCode`)", SendOobCode.handle),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:batchDelete", .admin, .json, .bulk,
                 "delete users (`localIds`, `force`)", BatchAccounts.batchDelete),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:batchGet", .admin, .none, .bulk,
                 "list users (`?maxResults=&nextPageToken=&tenantId=`)", BatchAccounts.batchGet),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:query", .admin, .json, .bulk, readOnly: true,
                 "query users (`expression` (its first: `userId`, `email`, `phoneNumber`), `sortBy`, `order`, `offset`, `limit` ≤ 500, `returnUserInfo: false` counts them), `{recordsCount, userInfo}`", BatchAccounts.query),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}:queryAccounts", .admin, .json, .bulk, readOnly: true,
                 "the same (`projects.queryAccounts`; a tenant by `tenantId`)", BatchAccounts.query),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:batchCreate", .admin, .json, .bulk,
                 "import users (`sanityCheck`: an email or a provider identity given to two users refuses the batch, `DUPLICATE_EMAIL` / `DUPLICATE_RAW_ID`); `tenants//accounts:batchCreate` is the top-level project", BatchAccounts.batchCreate),
        RouteRow("POST", RouteRow.legacyPrefix + "downloadAccount", .admin, .json, .bulk, readOnly: true,
                 "v3 `accounts:batchGet`: `{targetProjectId, maxResults, nextPageToken}` in the body", BatchAccounts.downloadAccount),
        RouteRow("POST", RouteRow.legacyPrefix + "uploadAccount", .admin, .json, .bulk,
                 "v3 `accounts:batchCreate`: `{targetProjectId, users, …}`", BatchAccounts.batchCreate),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant}]:createSessionCookie", .admin, .json, .offload, readOnly: true,
                 "a session cookie from an ID token (`validDuration` 300 s to 14 days)", SessionCookies.create),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}/config", .admin, .none, .loop,
                 "production Admin API config, incl. `signIn.phoneNumber.testPhoneNumbers`", AdminConfig.get),
        RouteRow("PATCH", "/identitytoolkit.googleapis.com/v2/projects/{project}/config", .admin, .json, .loop,
                 "PATCH with `?updateMask=`", AdminConfig.patch),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/oauthIdpConfigs", .admin, .json, .loop,
                 "create a provider configuration (`?oauthIdpConfigId=`); `enabled: false` turns its sign-in off", IdpConfigEndpoints.create(.oauth)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/oauthIdpConfigs", .admin, .none, .loop,
                 "list them (`?pageSize=&pageToken=`)", IdpConfigEndpoints.list(.oauth)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/oauthIdpConfigs/{config}", .admin, .none, .loop,
                 "one (`CONFIGURATION_NOT_FOUND`)", IdpConfigEndpoints.get(.oauth)),
        RouteRow("PATCH", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/oauthIdpConfigs/{config}", .admin, .json, .loop,
                 "update (`updateMask`)", IdpConfigEndpoints.patch(.oauth)),
        RouteRow("DELETE", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/oauthIdpConfigs/{config}", .admin, .none, .loop,
                 "delete", IdpConfigEndpoints.delete(.oauth)),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/inboundSamlConfigs", .admin, .json, .loop,
                 "create a provider configuration (`?inboundSamlConfigId=`); `enabled: false` turns its sign-in off", IdpConfigEndpoints.create(.saml)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/inboundSamlConfigs", .admin, .none, .loop,
                 "list them (`?pageSize=&pageToken=`)", IdpConfigEndpoints.list(.saml)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/inboundSamlConfigs/{config}", .admin, .none, .loop,
                 "one (`CONFIGURATION_NOT_FOUND`)", IdpConfigEndpoints.get(.saml)),
        RouteRow("PATCH", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/inboundSamlConfigs/{config}", .admin, .json, .loop,
                 "update (`updateMask`)", IdpConfigEndpoints.patch(.saml)),
        RouteRow("DELETE", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/inboundSamlConfigs/{config}", .admin, .none, .loop,
                 "delete", IdpConfigEndpoints.delete(.saml)),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/defaultSupportedIdpConfigs", .admin, .json, .loop,
                 "create a provider configuration (`?idpId=`); `enabled: false` turns its sign-in off", IdpConfigEndpoints.create(.defaultSupported)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/defaultSupportedIdpConfigs", .admin, .none, .loop,
                 "list them (`?pageSize=&pageToken=`)", IdpConfigEndpoints.list(.defaultSupported)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/defaultSupportedIdpConfigs/{config}", .admin, .none, .loop,
                 "one (`CONFIGURATION_NOT_FOUND`)", IdpConfigEndpoints.get(.defaultSupported)),
        RouteRow("PATCH", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/defaultSupportedIdpConfigs/{config}", .admin, .json, .loop,
                 "update (`updateMask`)", IdpConfigEndpoints.patch(.defaultSupported)),
        RouteRow("DELETE", "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/defaultSupportedIdpConfigs/{config}", .admin, .none, .loop,
                 "delete", IdpConfigEndpoints.delete(.defaultSupported)),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/defaultSupportedIdps", .admin, .none, .loop,
                 "the providers a `defaultSupportedIdpConfigs` may name", IdpConfigEndpoints.supported),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants", .admin, .none, .loop,
                 "list tenants (`?pageSize=&pageToken=`)", Tenants.list),
        RouteRow("POST", "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants", .admin, .json, .loop,
                 "create one (`displayName`, `disableAuth`, `testPhoneNumbers`, …)", Tenants.create),
        RouteRow("GET", "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants/{tenant}", .admin, .none, .loop,
                 "a tenant", Tenants.get),
        RouteRow("PATCH", "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants/{tenant}", .admin, .json, .loop,
                 "update it", Tenants.patch),
        RouteRow("DELETE", "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants/{tenant}", .admin, .none, .bulk,
                 "delete it and its users", Tenants.delete),

        // Keys and status.
        RouteRow("GET", "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com", .open, .none, .offload,
                 "the signing certificates (x509 map)", PublicKeys.x509),
        RouteRow("GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com", .open, .none, .offload,
                 "the signing keys (JWKS)", PublicKeys.jwks),
        RouteRow("GET", "/www.googleapis.com/identitytoolkit/v3/relyingparty/publicKeys", .open, .none, .offload,
                 "the session-cookie signing certificates (x509 map; the same keys)", PublicKeys.x509),
        RouteRow("GET", "/securetoken.google.com/{project}/.well-known/openid-configuration", .open, .none, .loop,
                 "OpenID configuration", PublicKeys.openIDConfiguration),
        RouteRow("GET", "/", .open, .none, .loop,
                 "readiness (`{\"authEmulator\":{\"ready\":true,…}}`); a browser (`Accept` preferring `text/html`) gets the console", Status.root),
        RouteRow("GET", "/emulator/openapi.json", .open, .none, .loop,
                 "this table as an OpenAPI 3 document: every operation's parameters, credentials and body fields", OpenAPI.handle),
        RouteRow("GET", "/console", .open, .none, .loop,
                 "the web console", Console.asset),
        RouteRow("GET", "/console/{file?}", .open, .none, .loop,
                 "the web console's files (embedded; ETag, CSP)", Console.asset),

        RouteRow("GET", "/emulator/action", .open, .none, .offload,
                 "where inbox links lead (`?mode=signIn|resetPassword|verifyEmail|verifyAndChangeEmail&oobCode=&apiKey=`): a redirect to the link's continue URL, or what happened (JSON, as the official emulator's pages; a browser opening a reset link gets a form for the new password)", EmulatorAction.handle),
        // The emulator API.
        RouteRow("GET", "/emulator/v1/clock", .emulator, .none, .loop,
                 "the emulator clock", EmulatorControls.clock),
        RouteRow("POST", "/emulator/v1/clock:advance", .emulator, .json, .loop,
                 "move it forward (`{seconds}`)", EmulatorControls.advanceClock),
        RouteRow("POST", "/emulator/v1/clock:reset", .emulator, .json, .loop,
                 "back to the real time", EmulatorControls.resetClock),
        RouteRow("POST", "/emulator/v1/keys:rotate", .emulator, .json, .bulk,
                 "new signing key; up to 4 previous ones stay published, older ones are retired (`retiredKids`); `{keySet: appCheck | phoneNumberVerification}` rotates those keys instead",
                 EmulatorControls.rotateKeys),
        RouteRow("POST", "/emulator/v1/projects/{project}:export", .emulator, .json, .bulk,
                 "export users and config (`{path}`, inside `--export-root`)", ExportEndpoint.handle),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/config", .emulator, .none, .loop,
                 "the per-project config block below", EmulatorAPI.getConfig),
        RouteRow("PATCH", "/emulator/v1/projects/{project}[/tenants/{tenant}]/config", .emulator, .json, .loop,
                 "PATCH merges", EmulatorAPI.patchConfig),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/verificationCodes", .emulator, .none, .loop,
                 "pending codes (`?phoneNumber=` filter)", EmulatorAPI.listCodes),
        RouteRow("DELETE", "/emulator/v1/projects/{project}[/tenants/{tenant}]/verificationCodes", .emulator, .none, .bulk,
                 "DELETE invalidates them", EmulatorAPI.clearCodes),
        RouteRow("DELETE", "/emulator/v1/projects/{project}[/tenants/{tenant}]/accounts", .emulator, .none, .bulk,
                 "wipe users", EmulatorAPI.wipeAccounts),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/users", .emulator, .none, .adaptive,
                 "search users by the start of a uid, email or email domain, phone number (with or without `+` and country code) or name word (`?q=&pageSize=&pageToken=`; the console's Users view; `matched`, with `matchedEstimated: true` when it is an upper bound past 1,000 matching words)", UserSearch.handle),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/verificationCodes:wait", .emulator, .none, .loop,
                 "long-poll for the next code (`?phoneNumber=&timeoutSeconds=`)", EmulatorAPI.waitForCode),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/totpCode", .emulator, .none, .loop,
                 "the code a TOTP factor accepts now on the emulator clock (`?localId=&mfaEnrollmentId=`, or a pending enrollment's `?sessionInfo=`)",
                 TOTPCodeEndpoint.handle),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/oobCodes", .emulator, .none, .loop,
                 "pending out-of-band codes, official shape (`?email=` filter)", OobInbox.list),
        RouteRow("DELETE", "/emulator/v1/projects/{project}[/tenants/{tenant}]/oobCodes", .emulator, .none, .bulk,
                 "DELETE invalidates them", OobInbox.clear),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/oobCodes:wait", .emulator, .none, .loop,
                 "long-poll for an email's next out-of-band code (`?email=&timeoutSeconds=`)", OobInbox.wait),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/events", .emulator, .none, .loop,
                 "the event stream: Server-Sent Events, or JSON lines with `?format=jsonl` (`Last-Event-ID` / `?since=ID` replay, `?type=` filters, `?follow=false`)",
                 EventStream.handle),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/webhooks", .emulator, .none, .loop,
                 "where the events are pushed (`events.webhooks`, `events.functionsEmulator`), with delivery counters", EmulatorAPI.webhooks),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/pushNotifications", .emulator, .none, .loop,
                 "iOS silent pushes (for `verifyClient`)", EmulatorControls.pushNotifications),
        RouteRow("POST", "/emulator/v1/projects/{project}[/tenants/{tenant}]/appCredentials", .emulator, .json, .offload,
                 "mint an attestation: `{type: RECAPTCHA | PLAY_INTEGRITY}` (passes `appVerification: ENFORCE` once), `{type: RECAPTCHA_ENTERPRISE, score?, action?, tollFraudScore?}` (reCAPTCHA SMS defense), `{type: APP_CHECK, appId?, ttlSeconds?}` (an App Check token), `{type: PNV, phoneNumber, ttlSeconds?}` (a Phone Number Verification token for a test number)",
                 EmulatorControls.mintCredential),
        RouteRow("GET", "/emulator/v1/projects/{project}[/tenants/{tenant}]/appCheck", .emulator, .none, .loop,
                 "App Check: the enforcement in force and the client calls counted (`verified`, `missing`, `invalid`, `refused`)",
                 EmulatorControls.appCheckStatus),
        RouteRow("POST", "/emulator/v1/projects/{project}[/tenants/{tenant}]/idTokens", .emulator, .json, .offload,
                 "a test principal in one call: `{uid, claims?, phoneNumber?, email?, signInProvider?, secondFactor?, authTime?, expiresIn?}` → `{idToken, refreshToken, expiresIn, localId, isNewUser}` (the user created or updated)",
                 IdTokensEndpoint.mint),
        RouteRow("POST", "/emulator/v1/projects/{project}:reset", .emulator, .json, .bulk,
                 "back to the starting state: the config file's config, the `--import`ed users, no codes or sessions; tenants too",
                 ResetEndpoints.resetProject),
        RouteRow("POST", "/emulator/v1:reset", .emulator, .json, .bulk,
                 "every project back to its starting state, and the clock to the real time", ResetEndpoints.resetAll),
        RouteRow("POST", "/emulator/v1/projects/{project}:snapshot", .emulator, .json, .bulk, readOnly: true,
                 "save the project's state (with its tenants) as `{name}` (in memory, at most 32 per project)", ResetEndpoints.save),
        RouteRow("POST", "/emulator/v1/projects/{project}:restore", .emulator, .json, .bulk,
                 "put the snapshot `{name}` back", ResetEndpoints.restore),
        RouteRow("GET", "/emulator/v1/projects/{project}/snapshots", .emulator, .none, .loop,
                 "the saved snapshots", ResetEndpoints.list),
        RouteRow("DELETE", "/emulator/v1/projects/{project}/snapshots/{snapshot}", .emulator, .none, .loop, readOnly: true,
                 "delete one", ResetEndpoints.delete),

        // App Check and Phone Number Verification (AppCheckEndpoints.swift), at production's paths.
        RouteRow("POST", "/firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:exchangeDebugToken", .apiKey, .json, .offload,
                 "a debug token (`{debugToken}`; any, or one of `appCheck.debugTokens`) → an App Check token `{token, ttl}`",
                 AppCheckEndpoints.exchangeDebugToken),
        RouteRow("POST", "/content-firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:exchangeDebugToken", .apiKey, .json, .offload,
                 "the same at the host the web SDK calls", AppCheckEndpoints.exchangeDebugToken),
        RouteRow("POST", "/firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:exchangeRecaptchaEnterpriseToken", .apiKey, .json, .offload,
                 "a reCAPTCHA token the emulator minted (`{recaptchaEnterpriseToken}`, single use) → an App Check token `{token, ttl}`",
                 AppCheckEndpoints.exchangeRecaptcha(field: "recaptchaEnterpriseToken", provider: "recaptcha_enterprise")),
        RouteRow("POST", "/firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:exchangeRecaptchaV3Token", .apiKey, .json, .offload,
                 "the same for `{recaptchaV3Token}`", AppCheckEndpoints.exchangeRecaptcha(field: "recaptchaV3Token", provider: "recaptcha_v3")),
        RouteRow("GET", "/firebaseappcheck.googleapis.com/v1/jwks", .open, .none, .bulk,
                 "the App Check keys (JWKS, RS256)", AppCheckEndpoints.jwks),
        RouteRow("GET", "/fpnv.googleapis.com/v1beta/jwks", .open, .none, .bulk,
                 "the Phone Number Verification keys (JWKS, ES256)", PNVTokens.jwks),

        // The provider page the SDKs open for popup, redirect and mobile provider sign-ins (ProviderPage.swift).
        RouteRow("GET", "/emulator/auth/handler", .open, .none, .bulk,
                 "the account chooser (`?apiKey=&providerId=&authType=&…`): lists the provider's users (at most 100, newest first), adds new ones, hands the result back to the SDK",
                 ProviderPage.handler),
        RouteRow("GET", "/emulator/auth/iframe", .open, .none, .loop,
                 "the JS SDK's helper iframe (Google's gapi channel)", ProviderPage.iframe),
        RouteRow("GET", "/emulator/auth/assets/{file}", .open, .none, .loop,
                 "the provider page's script and style sheet (embedded; ETag)", ProviderPage.asset),
    ]

    /// The table, compiled once.
    static let table = RouteTable(rows)

    static func match(method: String, path: String) -> Match { table.match(method: method, path: path) }

    /// Whether a path leads to a protected route with any method (for preflights, which name the method to come).
    static func isProtected(path: String) -> Bool { table.rowsMatching(path: path).contains { table.rows[$0].access.isProtected } }
}

/// A route table compiled for matching: static paths by one hash lookup of the raw path (the hot client calls),
/// the rest segment by segment on the percent-decoded path. 404 and 405 come from the table: 405 when some row's
/// path matches but none has the method.
struct RouteTable: Sendable {
    enum Segment: Sendable, Equatable {
        case literal(String)
        /// A parameter, maybe empty, then a literal suffix.
        case param(PathParams.Name, allowEmpty: Bool, suffix: String)
    }

    struct Pattern: Sendable {
        let row: Int
        let legacy: Bool
        /// The template with the optional group resolved (or the v3 path).
        let path: String
        let segments: [Segment]
    }

    let rows: [RouteRow]
    let patterns: [Pattern]
    /// Static paths: raw path → their routes by method, ready to return.
    let exact: [String: [(method: String, route: Route)]]
    /// Pattern indices by segment count, then by first segment (patterns whose first segment is a parameter are in
    /// every list and in `anyHost`), in table order.
    let candidates: [Int: (byHost: [String: [Int]], anyHost: [Int])]
    /// Templates that could not be compiled (reported by `validate`).
    let problems: [String]

    init(_ rows: [RouteRow]) {
        self.rows = rows
        var patterns: [Pattern] = []
        var problems: [String] = []
        for (i, row) in rows.enumerated() {
            var paths: [(String, Bool)] = []
            switch Self.expandOptional(row.template) {
            case .success(let expanded): paths = expanded.map { ($0, false) }
            case .failure(let problem): problems.append("\(row.method) \(row.template): \(problem)")
            }
            if let v3 = row.v3 { paths.append((RouteRow.legacyPrefix + v3, true)) }
            for (path, legacy) in paths {
                switch Self.compile(path) {
                case .success(let segments): patterns.append(Pattern(row: i, legacy: legacy, path: path, segments: segments))
                case .failure(let problem): problems.append("\(row.method) \(path): \(problem)")
                }
            }
        }
        var exact: [String: [(method: String, route: Route)]] = [:]
        var candidates: [Int: (byHost: [String: [Int]], anyHost: [Int])] = [:]
        for (p, pattern) in patterns.enumerated() {
            if pattern.segments.allSatisfy({ if case .literal = $0 { true } else { false } }) {
                exact[pattern.path, default: []].append((rows[pattern.row].method, Route(row: rows[pattern.row], params: PathParams(), legacy: pattern.legacy)))
            }
            var c = candidates[pattern.segments.count] ?? ([:], [])
            if case .literal(let host)? = pattern.segments.first {
                c.byHost[host, default: c.anyHost].append(p)
            } else {
                c.anyHost.append(p)
                for host in c.byHost.keys { c.byHost[host]!.append(p) }
            }
            candidates[pattern.segments.count] = c
        }
        self.patterns = patterns
        self.exact = exact
        self.candidates = candidates
        self.problems = problems
    }

    /// `a[/b]c` → `ac`, `a/bc`.
    static func expandOptional(_ template: String) -> Result<[String], TemplateProblem> {
        guard let open = template.firstIndex(of: "[") else {
            return template.contains("]") ? .failure(TemplateProblem("unbalanced ]")) : .success([template])
        }
        guard let close = template[open...].firstIndex(of: "]") else { return .failure(TemplateProblem("unbalanced [")) }
        let inner = template[template.index(after: open)..<close]
        let before = template[..<open], after = template[template.index(after: close)...]
        guard !inner.contains("["), !after.contains("["), !after.contains("]") else { return .failure(TemplateProblem("more than one optional group")) }
        guard inner.hasPrefix("/") else { return .failure(TemplateProblem("an optional group starts with /")) }
        return .success([String(before + after), String(before + inner + after)])
    }

    struct TemplateProblem: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    static func compile(_ path: String) -> Result<[Segment], TemplateProblem> {
        guard path.hasPrefix("/") else { return .failure(TemplateProblem("does not start with /")) }
        var segments: [Segment] = []
        for raw in splitPath(path) {
            let seg = String(raw)
            guard let open = seg.firstIndex(of: "{") else {
                if seg.contains("}") || seg.contains("%") { return .failure(TemplateProblem("stray } or % in \(seg)")) }
                segments.append(.literal(seg))
                continue
            }
            guard open == seg.startIndex, let close = seg.firstIndex(of: "}") else { return .failure(TemplateProblem("a parameter is a whole segment, maybe with a suffix: \(seg)")) }
            var name = seg[seg.index(after: open)..<close]
            let allowEmpty = name.hasSuffix("?")
            if allowEmpty { name = name.dropLast() }
            let suffix = String(seg[seg.index(after: close)...])
            guard let typed = PathParams.Name(rawValue: String(name)) else { return .failure(TemplateProblem("unknown parameter {\(name)}")) }
            guard !suffix.contains("{"), !suffix.contains("}") else { return .failure(TemplateProblem("two parameters in \(seg)")) }
            if segments.contains(where: { if case .param(typed, _, _) = $0 { true } else { false } }) {
                return .failure(TemplateProblem("{\(name)} twice"))
            }
            segments.append(.param(typed, allowEmpty: allowEmpty, suffix: suffix))
        }
        return .success(segments)
    }

    /// A path's segments: split on `/`, the part before the first `/` dropped, empty segments kept.
    static func splitPath(_ path: String) -> ArraySlice<Substring> {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    }

    func match(method: String, path: String) -> Router.Match {
        let m = method == "HEAD" ? "GET" : method
        if let entries = exact[path] {
            for e in entries where e.method == m { return .route(e.route) }
        }
        let segs = Self.decodedSegments(path)
        var pathMatched = false
        for p in candidates(segs) {
            guard let params = Self.bind(patterns[p].segments, segs) else { continue }
            let row = rows[patterns[p].row]
            if row.method == m { return .route(Route(row: row, params: params, legacy: patterns[p].legacy)) }
            pathMatched = true
        }
        return pathMatched ? .methodNotAllowed : .notFound
    }

    /// The rows whose path template matches `path` (any method).
    func rowsMatching(path: String) -> [Int] {
        let segs = Self.decodedSegments(path)
        return candidates(segs).filter { Self.bind(patterns[$0].segments, segs) != nil }.map { patterns[$0].row }
    }

    /// The patterns that may match these segments, in table order.
    func candidates(_ segs: [String]) -> [Int] {
        guard let c = candidates[segs.count], let host = segs.first else { return [] }
        return c.byHost[host] ?? c.anyHost
    }

    static func decodedSegments(_ path: String) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
            .map { $0.contains(UInt8(ascii: "%")) ? URLEncoding.percentDecode(Substring($0), plusAsSpace: false) : String(decoding: $0, as: UTF8.self) }
    }

    /// The parameters when `segs` fit the pattern.
    static func bind(_ pattern: [Segment], _ segs: [String]) -> PathParams? {
        guard pattern.count == segs.count else { return nil }
        var params = PathParams()
        for (s, seg) in zip(pattern, segs) {
            switch s {
            case .literal(let l):
                guard seg == l else { return nil }
            case .param(let name, let allowEmpty, let suffix):
                var value = seg
                if !suffix.isEmpty {
                    guard seg.hasSuffix(suffix) else { return nil }
                    value = String(seg.dropLast(suffix.count))
                }
                if value.isEmpty {
                    guard allowEmpty else { return nil }
                } else {
                    params[name] = value
                }
            }
        }
        return params
    }

    /// What is wrong with the table: templates that do not compile, unknown methods, empty docs, and two rows for
    /// the same method and path (parameter names aside).
    func validate() -> [String] {
        var out = problems
        var seen: [String: String] = [:]
        for (i, row) in rows.enumerated() {
            if !["GET", "POST", "PATCH", "DELETE", "PUT"].contains(row.method) { out.append("\(row.method) \(row.template): unknown method") }
            if row.doc.isEmpty { out.append("\(row.method) \(row.template): no doc") }
            if row.v3 != nil && row.method != "POST" { out.append("\(row.method) \(row.template): v3 paths are POST") }
            for p in patterns where p.row == i {
                let shape = p.segments.map { s -> String in
                    switch s {
                    case .literal(let l): l
                    case .param(_, let allowEmpty, let suffix): (allowEmpty ? "{?}" : "{}") + suffix
                    }
                }.joined(separator: "/")
                let key = row.method + " /" + shape
                if let first = seen[key] {
                    out.append("duplicate route \(row.method) \(p.path) (also \(first))")
                } else {
                    seen[key] = p.path
                }
            }
        }
        return out
    }

    /// docs/endpoints.md's table: one line per path template (methods of consecutive rows with the same template
    /// joined), v3 paths named beside their v1 path.
    func markdown() -> String {
        var lines = ["| method | path | credentials | what |", "|---|---|---|---|"]
        var i = 0
        while i < rows.count {
            var group = [rows[i]]
            while i + group.count < rows.count, rows[i + group.count].template == rows[i].template { group.append(rows[i + group.count]) }
            i += group.count
            var path = "`\(group[0].template)`"
            for r in group { if let v3 = r.v3 { path += ", v3 `\(RouteRow.legacyPrefix + v3)`" } }
            var access: [String] = []
            for r in group where !access.contains(r.access.summary) { access.append(r.access.summary) }
            let cells = [group.map(\.method).joined(separator: "/"), path, access.joined(separator: "; "), group.map(\.doc).joined(separator: "; ")]
            lines.append("| " + cells.map(Self.escapeCell).joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func escapeCell(_ s: String) -> String {
        var out = ""
        for c in s { if c == "|" { out += "\\|" } else { out.append(c) } }
        return out
    }
}
