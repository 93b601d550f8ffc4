import EmulatorSupport
import PhoneAuthCore

/// The verification keys, at production's paths with the host as first segment.
enum PublicKeys {
    static let cacheControl = ("Cache-Control", "public, max-age=60, must-revalidate, no-transform")

    /// `{kid: PEM certificate}` (what firebase-admin and google-auth read).
    static func x509(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(app.tokens.x509Document, headers: [cacheControl])
    }

    /// `{"keys":[{kty, alg, use, kid, n, e}]}`
    static func jwks(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(app.tokens.jwksDocument, headers: [cacheControl])
    }

    static func openIDConfiguration(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let host = call.request.headers["host"] ?? "127.0.0.1:9099"
        let base = "http://\(host)"
        return Reply([
            "issuer": .string("https://securetoken.google.com/\(call.projectId)"),
            "jwks_uri": .string("\(base)/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        ], headers: [cacheControl])
    }
}

/// `GET /` and `GET /v1/projects`.
enum Status {
    /// A browser (`Accept` preferring `text/html`) gets the console; every other client the readiness JSON.
    static func root(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        if Console.prefersHTML(call.request.headers["accept"]) {
            var r = try Console.serve("index.html", call)
            r.headers.append(("Vary", "Accept"))
            return r
        }
        return Reply([
            "authEmulator": ["ready": true, "docs": "https://firebase.google.com/docs/emulator-suite", "apiSpec": "/emulator/openapi.json"],
            "phoneAuthEmulator": [
                "version": .string(PhoneAuthApp.version),
                "projectId": .string(app.emulator.defaultProjectId),
                "tokenSigning": .string(app.tokens.mode.rawValue),
                "adminTokenRequired": .bool(app.adminToken != nil),
                "console": "/console/",
            ],
        ], headers: [("Vary", "Accept")])
    }

    static func projects(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(["projectId": .string(PhoneAuthApp.projectNumber), "authorizedDomains": ["localhost", "127.0.0.1"]])
    }
}
