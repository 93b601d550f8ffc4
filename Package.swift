// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "PhoneAuthEmulator",
    products: [
        .executable(name: "phone-auth-emulator", targets: ["phone-auth-emulator"]),
        .executable(name: "phone-auth", targets: ["phone-auth"]),
    ],
    targets: [
        // C shims: the Linux calls Swift's Glibc module does not export (epoll, eventfd, accept4, sigwait helpers).
        .target(name: "CSystem"),
        // OpenSSL 3 through the system library (libssl-dev); macros wrapped in shim.h.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // SQLite 3 through the system library (libsqlite3-dev), for --data-dir.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // JSON, logging, base64url, files, the system's random bytes: small helpers shared by every layer.
        .target(name: "EmulatorSupport", dependencies: ["CSystem"]),
        // RS256 signing and verification, X.509 and JWKS on OpenSSL's EVP API.
        .target(name: "JWT", dependencies: ["COpenSSL", "EmulatorSupport"]),
        // HTTP/1.1 over epoll; knows nothing of Firebase.
        .target(name: "HTTPServer", dependencies: ["CSystem", "EmulatorSupport"]),
        // The domain: phone numbers, sessions, users, config, errors, clock. No sockets, no OpenSSL, no C.
        .target(name: "PhoneAuthCore", dependencies: ["EmulatorSupport"]),
        // Durable state: the SQLite journal behind --data-dir.
        .target(name: "PhoneAuthStorage", dependencies: ["CSQLite", "CSystem", "PhoneAuthCore", "EmulatorSupport"]),
        // Routes and handlers: the Firebase wire surface.
        .target(name: "PhoneAuthAPI", dependencies: ["PhoneAuthCore", "HTTPServer", "JWT", "EmulatorSupport"]),
        // The server wired from its settings (keys, data directory, pools, listener): `PhoneAuthServer.start(settings:)`.
        .target(name: "PhoneAuthServer", dependencies: ["PhoneAuthAPI", "PhoneAuthStorage", "PhoneAuthCore", "HTTPServer", "JWT", "EmulatorSupport", "CSystem"]),
        .executableTarget(name: "phone-auth-emulator", dependencies: ["PhoneAuthServer", "PhoneAuthAPI", "HTTPServer", "EmulatorSupport", "CSystem"]),
        // The `phone-auth` command line: our own small argument parser and an HTTP client.
        .target(name: "PhoneAuthCLI", dependencies: ["EmulatorSupport", "HTTPServer", "JWT"]),
        .executableTarget(name: "phone-auth", dependencies: ["PhoneAuthCLI", "EmulatorSupport"]),
        // bench/run's micro-benchmark: one RS256 signature and one whole ID token through our code.
        .executableTarget(name: "sign-bench", dependencies: ["JWT", "EmulatorSupport", "CSystem"]),
        // libFuzzer target (scripts/fuzz builds it with -sanitize=fuzzer); a plain build is a replay driver.
        .executableTarget(name: "fuzz-requests", dependencies: ["PhoneAuthAPI", "PhoneAuthCore", "HTTPServer", "EmulatorSupport", "CSystem"]),
        // Helpers and fixtures shared by the test targets (temporary directories, test emulators and apps, one signing key).
        .target(name: "PhoneAuthTestSupport", dependencies: ["PhoneAuthAPI", "PhoneAuthCore", "HTTPServer", "JWT", "EmulatorSupport"]),
        .testTarget(name: "EmulatorSupportTests", dependencies: ["EmulatorSupport", "PhoneAuthTestSupport"]),
        .testTarget(name: "JWTTests", dependencies: ["JWT", "EmulatorSupport"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "CSystem"]),
        .testTarget(name: "PhoneAuthCoreTests", dependencies: ["PhoneAuthCore", "PhoneAuthTestSupport"]),
        .testTarget(name: "PhoneAuthAPITests", dependencies: ["PhoneAuthAPI", "PhoneAuthCore", "HTTPServer", "JWT", "PhoneAuthTestSupport"]),
        .testTarget(name: "PhoneAuthCLITests", dependencies: ["PhoneAuthCLI"]),
        .testTarget(name: "PhoneAuthStorageTests", dependencies: ["PhoneAuthStorage", "PhoneAuthCore", "PhoneAuthAPI", "HTTPServer", "PhoneAuthTestSupport"]),
        .testTarget(name: "PhoneAuthServerTests", dependencies: ["PhoneAuthServer", "PhoneAuthAPI", "PhoneAuthCore", "HTTPServer", "EmulatorSupport", "PhoneAuthTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
