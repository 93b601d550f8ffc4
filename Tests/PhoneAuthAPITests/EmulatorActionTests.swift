import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `GET /emulator/action` (issue 25): the redirect's URL building and escaping, the continue URL's size limit, and
/// the reset form a browser gets.
final class EmulatorActionTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!

    override func setUp() { app = makeTestApp(seed: 25, signing: .none) }

    let owner = [("Authorization", "Bearer owner")]
    let browser = [("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")]

    /// The raw answer (status, headers, body text).
    func raw(_ target: String, headers: [(String, String)] = []) -> (Int, [(String, String)], String) {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        let resp = app.respond(to: HTTPRequest(method: "GET", target: target, headers: h, body: []), context: .detached)
        return (resp?.status ?? 0, resp?.headers ?? [], String(decoding: resp?.body ?? [], as: UTF8.self))
    }

    func header(_ name: String, _ headers: [(String, String)]) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// An admin send with `returnOobLink` (its `oobLink`).
    func send(_ body: String) throws -> String {
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendOobCode", body, headers: owner)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return try XCTUnwrap(r.1["oobLink"]?.stringValue)
    }

    /// The link's path and query, as a browser requests it.
    func target(_ link: String) throws -> String {
        String(link[try XCTUnwrap(link.range(of: "/emulator/action")).lowerBound...])
    }

    func testAddingKeepsTheContinueUrlsQueryAsWrittenAndReplacesTheLinksParameters() {
        XCTAssertEqual(EmulatorAction.adding([("mode", "signIn"), ("oobCode", "c")], to: "http://h/p?x=1&y=a+b&flag#frag"),
                       "http://h/p?x=1&y=a+b&flag&mode=signIn&oobCode=c#frag")
        XCTAssertEqual(EmulatorAction.adding([("mode", "signIn"), ("lang", "en")], to: "https://h/in?mode=old&lang=xx&keep=1"),
                       "https://h/in?mode=signIn&lang=en&keep=1")
        // A name given twice: one slot, the last value.
        XCTAssertEqual(EmulatorAction.adding([("a", "1"), ("a", "2")], to: "http://h/"), "http://h/?a=2")
        // An encoded name in the continue URL is the same name.
        XCTAssertEqual(EmulatorAction.adding([("mode", "signIn")], to: "http://h/?m%6Fde=x"), "http://h/?mode=signIn")
        XCTAssertEqual(EmulatorAction.adding([("k", "a b&c")], to: "http://h/#f?g"), "http://h/?k=a%20b%26c#f?g")
        XCTAssertEqual(EmulatorAction.adding([], to: "http://h/p"), "http://h/p")
    }

    /// The RECOVER_EMAIL link an email change sends the old address restores it; the second click is the expired page.
    func testTheRecoverEmailLinkRestoresTheOldAddress() throws {
        let up = itk("signUp", #"{"email":"was@example.com","password":"secret1","returnSecureToken":true}"#).1
        XCTAssertEqual(itk("update", #"{"idToken":"\#(up["idToken"]!.stringValue!)","email":"now@example.com"}"#).0, 200)
        let codes = call("GET", "/emulator/v1/projects/demo-phone/oobCodes").1["oobCodes"]?.arrayValue ?? []
        let link = try XCTUnwrap(codes.first { $0["requestType"] == "RECOVER_EMAIL" }?["oobLink"]?.stringValue)
        let first = raw(try target(link))
        XCTAssertEqual(first.0, 200, first.2)
        XCTAssertEqual(try JSONParser.parse(first.2)["authEmulator"], ["success": "The email has been successfully reset.", "email": "was@example.com"])
        let again = raw(try target(link))
        XCTAssertEqual(again.0, 400)
        XCTAssertTrue(again.2.contains("Your request to revert your email has expired or the link has already been used."))
        XCTAssertEqual(itk("signInWithPassword", #"{"email":"was@example.com","password":"secret1"}"#).0, 200)
    }

    func testARedirectsLocationIsPlainAscii() {
        XCTAssertEqual(EmulatorAction.escapingUnsafe("http://h/ünï?q=é#frä"), "http://h/%C3%BCn%C3%AF?q=%C3%A9#fr%C3%A4")
        XCTAssertEqual(EmulatorAction.escapingUnsafe("http://h/a b\r\n\"<>`\u{7F}"), "http://h/a%20b%0D%0A%22%3C%3E%60%7F")
        XCTAssertEqual(EmulatorAction.escapingUnsafe("http://h/%41?x=%zz&y='{}'"), "http://h/%41?x=%zz&y='{}'", "the rest as written")
        let location = header("Location", EmulatorAction.redirect(to: "http://h/\u{2028}").headers)
        XCTAssertEqual(location, "http://h/%E2%80%A8")
    }

    func testTheContinueUrlIsAtMost2048Bytes() throws {
        let longest = "http://localhost/" + String(repeating: "a", count: SendOobCode.maxContinueUrlBytes - 17)
        let link = try send(#"{"requestType":"EMAIL_SIGNIN","email":"a@example.com","returnOobLink":true,"continueUrl":"\#(longest)"}"#)
        let (status, headers, _) = raw(try target(link))
        XCTAssertEqual(status, 303)
        XCTAssertTrue(header("Location", headers)?.hasPrefix(longest + "?mode=signIn&") == true)
        let r = itk("sendOobCode", #"{"requestType":"EMAIL_SIGNIN","email":"b@example.com","continueUrl":"\#(longest)b"}"#)
        XCTAssertEqual(message(r), "INVALID_CONTINUE_URI : ((the continue URL is longer than 2048 bytes))")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/oobCodes?email=b@example.com").1["oobCodes"], [])
    }

    func testABrowserGetsTheResetFormAndAClientTheJSONPage() throws {
        XCTAssertEqual(itk("signUp", #"{"email":"o'neil@example.com","password":"secret1"}"#).0, 200)
        let cont = #"http://localhost/after?q=\"><script>alert(1)</script>&r='x'"#
        let link = try send(#"{"requestType":"PASSWORD_RESET","email":"o'neil@example.com","returnOobLink":true,"continueUrl":"\#(cont)"}"#)
        let (status, headers, html) = raw(try target(link), headers: browser)
        XCTAssertEqual(status, 200)
        XCTAssertEqual(header("Content-Type", headers), "text/html; charset=utf-8")
        XCTAssertEqual(header("Cache-Control", headers), "no-store")
        XCTAssertEqual(header("Referrer-Policy", headers), "no-referrer")
        XCTAssertEqual(header("Content-Security-Policy", headers), "default-src 'none'; form-action 'self' http: https:; base-uri 'none'")
        XCTAssertTrue(html.contains(#"<b id="email">o&#39;neil@example.com</b>"#), html)
        XCTAssertTrue(html.contains(#"<form id="reset" method="get" action="/emulator/action">"#), html)
        XCTAssertTrue(html.contains(#"<input type="hidden" name="mode" value="resetPassword">"#), html)
        XCTAssertTrue(html.contains(#"<input type="hidden" name="continueUrl" value="http://localhost/after?q=&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;r=&#39;x&#39;">"#), html)
        XCTAssertFalse(html.contains("<script"), "nothing from the link is markup")
        XCTAssertTrue(html.contains(#"<input id="newPassword" name="newPassword" type="password""#), html)
        // What the form sends: the link's own parameters and the new password.
        let (done, doneHeaders, _) = raw(try target(link) + "&newPassword=secret2", headers: browser)
        XCTAssertEqual(done, 303)
        XCTAssertEqual(header("Location", doneHeaders), "http://localhost/after?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E&r='x'")
        XCTAssertEqual(itk("signInWithPassword", #"{"email":"o'neil@example.com","password":"secret2"}"#).0, 200)
        // Used: the browser gets the expired page, not the form.
        let (used, _, page) = raw(try target(link), headers: browser)
        XCTAssertEqual(used, 400)
        XCTAssertTrue(page.contains("Your request to reset your password has expired"), page)
    }

    func testAClientWithoutTextHtmlGetsTheOfficialJSONPage() throws {
        XCTAssertEqual(itk("signUp", #"{"email":"c@example.com","password":"secret1"}"#).0, 200)
        let link = try send(#"{"requestType":"PASSWORD_RESET","email":"c@example.com","returnOobLink":true}"#)
        for headers in [[], [("Accept", "*/*")], [("Accept", "application/json")], [("Accept", String(repeating: "a", count: 5000) + "text/html")]] {
            let (status, h, body) = raw(try target(link), headers: headers)
            XCTAssertEqual(status, 400, "\(headers)")
            XCTAssertEqual(header("Content-Type", h), "application/json; charset=utf-8")
            XCTAssertTrue(body.contains("missing newPassword query parameter"), body)
        }
    }

    func testHTMLEscaping() {
        XCTAssertEqual(EmulatorAction.htmlEscaped(#"<a href="x">&'</a>é"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;é")
        XCTAssertEqual(EmulatorAction.htmlEscaped(""), "")
    }
}
