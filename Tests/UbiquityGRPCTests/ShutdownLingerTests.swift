import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Graceful shutdown must not reset the connection under a client that is still reading: a
/// close() with unread input makes the kernel send RST, and the client then loses whatever it
/// had not read yet (the end of the response, the trailers, the final GOAWAY).
///
/// The client here is a raw socket speaking just enough HTTP/2: it asks for a 16 MiB response,
/// lets the server fill the socket buffers while shutdown begins, then reads slowly and sends a
/// WINDOW_UPDATE after every read — so some of its bytes are always unread by a server that
/// stopped reading. It must get every byte of the response, the trailers, the GOAWAY and a clean
/// EOF (not ECONNRESET).
final class ShutdownLingerTests: XCTestCase {
    final class Gate: Sendable {
        let started = EventCounter()
        let release = EventCounter()
    }

    private static let responseBytes = 16 << 20

    func testClientReadingDuringShutdownGetsEverythingAndACleanClose() throws {
        let gate = Gate()
        var router = Router()
        let big = Data(repeating: 0x61, count: Self.responseBytes)
        router.blockingUnary("/test.Linger/Big") { (_: Ubiquity_V1_PingRequest, _: SyncCallContext) -> Ubiquity_V1_PingResponse in
            gate.started.signal()
            _ = gate.release.wait()
            var res = Ubiquity_V1_PingResponse()
            res.payload = big
            return res
        }
        let server = try LoopbackServer.start(router) { config in
            config.blockingThreads = 1
            config.maxSendMessageBytes = 32 << 20
            config.shutdownGraceSeconds = 30
        }
        defer { LoopbackServer.stop(server) }

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { Glibc.close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(server.port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(rc, 0)
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        // Preface, SETTINGS (huge stream window), a huge connection window, the request.
        var out = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        out += Self.frame(type: 4, flags: 0, stream: 0, [0, 4, 0x7F, 0xFF, 0xFF, 0xFF])
        out += Self.frame(type: 8, flags: 0, stream: 0, Self.be32(1 << 30))
        var block: [UInt8] = []
        for (name, value) in [(":method", "POST"), (":scheme", "http"), (":path", "/test.Linger/Big"),
                              (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")] {
            block += [0, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        out += Self.frame(type: 1, flags: 0x4, stream: 1, block)
        out += Self.frame(type: 0, flags: 0x1, stream: 1, [0, 0, 0, 0, 0])
        XCTAssertEqual(send(fd, out, out.count, Int32(MSG_NOSIGNAL)), out.count)

        XCTAssertTrue(gate.started.wait(), "the handler did not start")
        server.beginShutdown()
        // The final GOAWAY goes out while the call is still running: read up to it (the
        // response cannot have started, its handler is held).
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !Self.hasFinalGoAway(received, lastStream: 1) {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { XCTFail("the connection ended before the final GOAWAY (errno \(errno))"); return }
            received += chunk[0..<n]
        }
        gate.release.signal()
        // The server fills the socket buffers while we read nothing yet. No event says "the
        // kernel's buffers are full" (bounded polling is the only way to see it), so wait until
        // 32 KiB of the response sit unread here: it is under way and we are behind it (a
        // loopback receive buffer starts at 128 KiB, about half of it for data).
        let filling = pollUntil { Self.unreadBytes(fd) >= 32 * 1024 || Self.unreadBytes(fd) < 0 }
        XCTAssertTrue(filling, "the response did not start")

        let windowUpdate = Self.frame(type: 8, flags: 0, stream: 0, Self.be32(1))
        var readError: Int32 = 0
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                readError = errno
                break
            }
            received += chunk[0..<n]
            _ = send(fd, windowUpdate, windowUpdate.count, Int32(MSG_NOSIGNAL))
        }
        XCTAssertEqual(readError, 0, "the read ended with errno \(readError) (\(String(cString: strerror(readError))))")

        // Walk the frames the server sent.
        var offset = 0
        var dataBytes = 0
        var trailersEnded = false
        var goaways = 0
        while received.count - offset >= 9 {
            let length = Int(received[offset]) << 16 | Int(received[offset + 1]) << 8 | Int(received[offset + 2])
            let type = received[offset + 3]
            let flags = received[offset + 4]
            let stream = (Int(received[offset + 5]) & 0x7F) << 24 | Int(received[offset + 6]) << 16
                | Int(received[offset + 7]) << 8 | Int(received[offset + 8])
            guard received.count - offset - 9 >= length else { break }
            if type == 0 && stream == 1 { dataBytes += length }
            if type == 1 && stream == 1 && flags & 0x1 != 0 { trailersEnded = true }
            if type == 7 { goaways += 1 }
            offset += 9 + length
        }
        XCTAssertEqual(offset, received.count, "a frame was cut off")
        // The response message: 5-byte prefix + field 1 (tag, 4-byte varint length, payload).
        XCTAssertEqual(dataBytes, 5 + 1 + 4 + Self.responseBytes)
        XCTAssertTrue(trailersEnded, "no trailers ending the call")
        XCTAssertGreaterThanOrEqual(goaways, 1, "no GOAWAY")
    }

    /// True when `bytes` hold a complete GOAWAY frame naming `lastStream` as the last stream
    /// (the final one; the shutdown notice names 2^31-1).
    private static func hasFinalGoAway(_ bytes: [UInt8], lastStream: UInt32) -> Bool {
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            guard bytes.count - offset - 9 >= length else { return false }
            if bytes[offset + 3] == 7 && length >= 8 {
                let p = offset + 9
                let last = (UInt32(bytes[p]) & 0x7F) << 24 | UInt32(bytes[p + 1]) << 16 | UInt32(bytes[p + 2]) << 8 | UInt32(bytes[p + 3])
                if last == lastStream { return true }
            }
            offset += 9 + length
        }
        return false
    }

    /// Bytes received on `fd` and not yet read (FIONREAD); -1 on error.
    private static func unreadBytes(_ fd: Int32) -> Int {
        var n: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &n) == 0 ? Int(n) : -1
    }

    private static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }

    private static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags] + be32(stream) + payload
    }
}
