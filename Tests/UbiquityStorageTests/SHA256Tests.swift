import XCTest
@testable import UbiquityStorage

/// The in-house SHA-256 against FIPS 180-4's examples, one-shot and incremental alike at every
/// length around the block and padding boundaries.
final class SHA256Tests: XCTestCase {
    func hex(_ s: String) -> String { SHA256.hexString(SHA256.digest(Array(s.utf8))) }

    func testKnownDigests() {
        XCTAssertEqual(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var h = SHA256.Hasher()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { h.update(chunk) }
        XCTAssertEqual(SHA256.hexString(h.finalize()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testOneShotAndIncrementalAgreeAtEveryLength() {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for n in 0...bytes.count {
            let input = Array(bytes[0..<n])
            var h = SHA256.Hasher()
            h.update(input.prefix(n / 3))
            h.update(input.dropFirst(n / 3))
            XCTAssertEqual(SHA256.digest(input), h.finalize(), "length \(n)")
            XCTAssertEqual(input.withUnsafeBytes { SHA256.hexDigest($0) }, SHA256.hexString(SHA256.digest(input)), "hex, length \(n)")
        }
    }
}
