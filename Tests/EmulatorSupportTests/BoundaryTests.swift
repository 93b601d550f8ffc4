@testable import EmulatorSupport
import PhoneAuthTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 11: log lines cannot be forged, and file writes never follow a planted symlink.
final class BoundaryTests: XCTestCase {
    func testTextLogEscapesEveryControlCharacter() {
        let sink = MemoryLogSink()
        let log = Logger(label: "t", level: .info, format: .text, sink: sink)
        let forged = "x\nTo verify the phone number +15550001111, use the code 424242."
        log.info("tenant \(forged)", [("tenant", forged), ("k\r", "\u{1B}[2J\u{0}\u{7F}\u{9B}\u{2028}\t")])
        XCTAssertEqual(sink.all.count, 1)
        let line = sink.all[0]
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || ($0.value >= 0x7F && $0.value <= 0x9F) || $0.value == 0x2028 })
        XCTAssertTrue(line.hasSuffix(#"tenant x\nTo verify the phone number +15550001111, use the code 424242. tenant=x\nTo verify the phone number +15550001111, use the code 424242. k\r=\u{1B}[2J\u{0}\u{7F}\u{9B}\u{2028}\t"#), line)
        // Ordinary text is untouched.
        log.info("To verify the phone number +16505550000, use the code 123456.", [("project", "demo-phone")])
        XCTAssertTrue(sink.all[1].hasSuffix("To verify the phone number +16505550000, use the code 123456. project=demo-phone"))
    }

    func testJSONLogEscapesDELAndC1Too() throws {
        let sink = MemoryLogSink()
        let log = Logger(label: "t", level: .info, format: .json, sink: sink)
        let value = "a\nb\u{1B}c\u{7F}d\u{85}e\u{2029}f"
        log.info(value, [("tenant", value)])
        let line = sink.all[0]
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || ($0.value >= 0x7F && $0.value <= 0x9F) || $0.value == 0x2029 }, line)
        let parsed = try JSONParser.parse(line)
        XCTAssertEqual(parsed["message"], .string(value), "escapes keep the same text")
        XCTAssertEqual(parsed["tenant"], .string(value))
    }

    var dir = ""
    override func setUp() {
        dir = TemporaryDirectory.make("phone-auth-files")
    }
    override func tearDown() { TemporaryDirectory.remove(dir) }

    func testAtomicWriteReplacesASymlinkInsteadOfFollowingIt() throws {
        let victim = dir + "/victim"
        try Files.writeAtomically(victim, Array("precious".utf8))
        XCTAssertEqual(symlink(victim, dir + "/out.json"), 0)
        let fd = try Files.openDirectory(dir)
        defer { close(fd) }
        try Files.writeAtomically(in: fd, name: "out.json", Array("{}".utf8))
        XCTAssertEqual(try Files.read(victim), Array("precious".utf8), "the symlink's target is untouched")
        var st = stat()
        XCTAssertEqual(lstat(dir + "/out.json", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFREG, "the link itself was replaced by the new file")
        XCTAssertEqual(try Files.read(dir + "/out.json"), Array("{}".utf8))
        // No temporary files are left behind.
        XCTAssertEqual(try listing(), ["out.json", "victim"])
    }

    func testNamesAndPathsThatCouldEscapeAreRefused() throws {
        let fd = try Files.openDirectory(dir)
        defer { close(fd) }
        for bad in ["", ".", "..", "../x", "a/b", "x\u{0}y"] {
            XCTAssertThrowsError(try Files.writeAtomically(in: fd, name: bad, [1]), bad)
            XCTAssertThrowsError(try Files.openSubdirectory(fd, bad), bad)
        }
        // A NUL in a path never reaches the C library (which would cut the path there).
        XCTAssertThrowsError(try Files.writeAtomically(dir + "/a\u{0}/../../x", [1]))
        XCTAssertThrowsError(try Files.read(dir + "/victim\u{0}x"))
        XCTAssertFalse(Files.exists(dir + "\u{0}/nothing"))
        XCTAssertEqual(try listing(), [])
    }

    func testSubdirectoriesAreNeverOpenedThroughASymlink() throws {
        XCTAssertEqual(mkdir(dir + "/outside", 0o755), 0)
        XCTAssertEqual(symlink(dir + "/outside", dir + "/link"), 0)
        let fd = try Files.openDirectory(dir)
        defer { close(fd) }
        XCTAssertThrowsError(try Files.openSubdirectory(fd, "link"))
        let sub = try Files.openSubdirectory(fd, "made")
        close(sub)
        var st = stat()
        XCTAssertEqual(stat(dir + "/made", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)
    }

    func listing() throws -> [String] { try TemporaryDirectory.listing(dir) }
}
