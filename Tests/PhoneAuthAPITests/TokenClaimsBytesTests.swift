import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// The ID token payload written straight into bytes is what serializing `TokenService.claims` gives, for every mix of
/// user fields, sign-in provider, tenant and second factor; users with custom claims take the general path.
final class TokenClaimsBytesTests: XCTestCase {
    func testBytesMatchSerializedClaims() {
        var compared = 0
        for name in [nil, "Ada \"Q\" Lovelace\n"] as [String?] {
            for photo in [nil, "https://example.com/p.png"] as [String?] {
                for email in [nil, "a\\b@example.com"] as [String?] {
                    for phone in [nil, "+16505554567"] as [String?] {
                        for verified in [false, true] {
                            for provider in ["phone", "anonymous", "password"] {
                                for tenant in [nil, "tenant-1"] as [String?] {
                                    for factor in [nil, "f-1"] as [String?] {
                                        var user = UserRecord(localId: "uid\u{1}é", createdAt: 1)
                                        user.displayName = name
                                        user.photoUrl = photo
                                        user.email = email
                                        user.emailVerified = verified
                                        user.phoneNumber = phone
                                        let key = StoreKey(projectId: "demo-p", tenantId: tenant)
                                        let bytes = TokenService.claimsJSON(for: user, key: key, authTime: 1_796_136_825, signInProvider: provider,
                                                                            issuedAt: 1_796_136_900, secondFactorId: factor)
                                        let object = TokenService.claims(for: user, key: key, authTime: 1_796_136_825, signInProvider: provider,
                                                                         issuedAt: 1_796_136_900, secondFactorId: factor)
                                        XCTAssertEqual(bytes, JSON.object(object).serialized())
                                        compared += 1
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        XCTAssertEqual(compared, 384)
    }

    func testCustomClaimsTakeTheGeneralPath() {
        var user = UserRecord(localId: "u", createdAt: 1)
        user.customAttributes = #"{"role":"admin"}"#
        XCTAssertNil(TokenService.claimsJSON(for: user, key: StoreKey(projectId: "p", tenantId: nil), authTime: 1, signInProvider: "phone", issuedAt: 2))
    }
}
