@testable import PhoneAuthCore
import XCTest

/// An import batch's memo of valid claims texts (`ValidClaims`): a text is taken as valid only when the same bytes
/// were; anything else is checked as `CustomClaims.validate` checks it.
final class ValidClaimsTests: XCTestCase {
    func testATextIsValidOnlyWhenTheSameBytesWere() throws {
        let memo = ValidClaims()
        XCTAssertEqual(try memo.validate(#"{"role":"tester"}"#), #"{"role":"tester"}"#)
        XCTAssertEqual(try memo.validate(#"{"role":"tester"}"#), #"{"role":"tester"}"#)
        XCTAssertThrowsError(try memo.validate(#"{"sub":"x"}"#)) { XCTAssertEqual(($0 as? AuthError)?.code, .forbiddenClaim) }
        XCTAssertThrowsError(try memo.validate(#"{"role":"#)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidClaims) }
        XCTAssertThrowsError(try memo.validate("")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidClaims) }
        // Canonically equivalent to a valid text, with as many UTF-8 bytes, but twice the UTF-16 units: too large.
        let precomposed = #"{"k":""# + String(repeating: "\u{1E0A}", count: 992) + #""}"#
        let decomposed = #"{"k":""# + String(repeating: "D\u{307}", count: 992) + #""}"#
        XCTAssertEqual(precomposed, decomposed)  // String's ==
        XCTAssertEqual(precomposed.utf8.count, decomposed.utf8.count)
        XCTAssertEqual(try memo.validate(precomposed), precomposed)
        XCTAssertThrowsError(try memo.validate(decomposed)) { XCTAssertEqual(($0 as? AuthError)?.code, .claimsTooLarge) }
    }
}
