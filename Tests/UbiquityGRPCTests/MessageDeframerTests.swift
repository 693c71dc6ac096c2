import XCTest
@testable import UbiquityGRPC

/// gRPC message framing, without nghttp2: whole messages, split messages, the failures.
final class MessageDeframerTests: XCTestCase {
    private func frame(_ bytes: [UInt8], compressed: UInt8 = 0) -> [UInt8] {
        let n = UInt32(bytes.count)
        return [compressed, UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + bytes
    }

    private func feed(_ d: inout MessageDeframer, _ chunk: [UInt8], max: Int = 1024, single: Bool = false,
                      into out: inout [[UInt8]]) -> MessageDeframer.Failure? {
        var got: [[UInt8]] = []
        let failure = chunk.withUnsafeBytes { d.feed($0, maxMessageBytes: max, singleMessage: single) { m, wire in
            XCTAssertEqual(wire, m.count + 5)
            got.append(m)
        } }
        out += got
        return failure
    }

    func testMessagesSplitAnywhereComeOutWholeAndInOrder() {
        let stream = frame([1, 2, 3]) + frame([]) + frame(Array(repeating: 7, count: 300))
        for cut in 0...stream.count {
            var d = MessageDeframer()
            var out: [[UInt8]] = []
            XCTAssertNil(feed(&d, Array(stream[..<cut]), into: &out))
            XCTAssertNil(feed(&d, Array(stream[cut...]), into: &out))
            XCTAssertEqual(out, [[1, 2, 3], [], Array(repeating: 7, count: 300)], "cut at \(cut)")
            XCTAssertEqual(d.messages, 3)
            XCTAssertNil(d.finish(singleMessage: false))
            d.release()
        }
    }

    func testEndInsideAMessageIsTruncated() {
        var d = MessageDeframer()
        var out: [[UInt8]] = []
        XCTAssertNil(feed(&d, Array(frame([1, 2, 3]).prefix(6)), into: &out))
        XCTAssertEqual(d.finish(singleMessage: false), .truncated(bufferedBytes: 6))
        XCTAssertEqual(d.finish(singleMessage: false)?.status(kind: .unary, maxMessageBytes: 1).message,
                       "request ended inside a message (6 bytes of an incomplete frame)")
        d.release()
    }

    func testFailures() {
        var out: [[UInt8]] = []
        var d = MessageDeframer()
        XCTAssertEqual(feed(&d, frame([1], compressed: 1), into: &out), .compressed)
        XCTAssertEqual(d.bufferedBytes, 0)
        d.reset()
        XCTAssertEqual(feed(&d, Array(frame(Array(repeating: 0, count: 11)).prefix(5)), max: 10, into: &out),
                       .tooLarge(length: 11), "the declared length is enough to refuse")
        d.reset()
        XCTAssertEqual(feed(&d, frame([1]) + frame([2]), single: true, into: &out), .extraMessage)
        XCTAssertEqual(out, [[1]], "the first message was delivered before the second failed")
        d.reset()
        XCTAssertEqual(d.finish(singleMessage: true), .missingMessage)
        XCTAssertNil(d.finish(singleMessage: false), "a client stream may be empty")
        XCTAssertEqual(MessageDeframer.Failure.extraMessage.status(kind: .serverStreaming, maxMessageBytes: 1).message,
                       "server-streaming call received more than one request message")
        XCTAssertEqual(MessageDeframer.Failure.tooLarge(length: 11).status(kind: .unary, maxMessageBytes: 10).code,
                       .resourceExhausted)
        d.release()
    }
}
