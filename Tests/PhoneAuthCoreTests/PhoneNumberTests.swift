import PhoneAuthCore
import XCTest

final class PhoneNumberTests: XCTestCase {
    func testNormalisation() throws {
        for raw in ["+16505554567", "+1 (650) 555-4567", "+1.650.555.4567", "+1-650-555-4567", " +1 650 5554567 "] {
            XCTAssertEqual(try PhoneNumber(parsing: raw).e164, "+16505554567", raw)
        }
        XCTAssertEqual(try PhoneNumber(parsing: "+44 20 7946 0958").callingCode, "44")
        XCTAssertEqual(try PhoneNumber(parsing: "+358 40 1234567").callingCode, "358")
    }

    func testErrorsAreGooglesExactStrings() {
        func message(_ raw: String?) -> String? {
            do { _ = try PhoneNumber(parsing: raw); return nil } catch { return error.description }
        }
        XCTAssertEqual(message(nil), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message(""), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("6505554567"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("+1650555456a"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("+1+6505554567"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("+"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("+٦٥٠٥٥٥٤٥٦٧"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("\u{200F}+16505554567"), "INVALID_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message("+2812345678"), "INVALID_PHONE_NUMBER : Invalid format.")  // +28x is unassigned
        XCTAssertEqual(message("+1650"), "INVALID_PHONE_NUMBER : TOO_SHORT")
        XCTAssertEqual(message("+1650555456712345"), "INVALID_PHONE_NUMBER : TOO_LONG")
        XCTAssertEqual(message(String(repeating: "9", count: 200)), "INVALID_PHONE_NUMBER : Invalid format.")
    }

    func testRegions() throws {
        XCTAssertEqual(try PhoneNumber(parsing: "+16505554567").region, "US")
        XCTAssertEqual(try PhoneNumber(parsing: "+14165551234").region, "CA")
        XCTAssertEqual(try PhoneNumber(parsing: "+18765551234").region, "JM")
        XCTAssertEqual(try PhoneNumber(parsing: "+447911123456").region, "GB")
        XCTAssertEqual(try PhoneNumber(parsing: "+77011234567").region, "KZ")
        XCTAssertEqual(try PhoneNumber(parsing: "+79161234567").region, "RU")
        XCTAssertNil(try PhoneNumber(parsing: "+80012345678").region)
    }
}
