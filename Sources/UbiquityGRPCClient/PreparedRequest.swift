import CNGHTTP2
import UbiquityGRPC

/// A request built once and sent any number of times: the HEADERS block (as an nghttp2 header
/// array over one byte buffer) and the gRPC-framed message (5-byte prefix + bytes).
///
/// Immutable after `init`, so it may be shared across loops. Headers are handed to nghttp2 with
/// `NGHTTP2_NV_FLAG_NO_COPY_*`: each call in flight keeps its `PreparedRequest` alive until its
/// stream closes, so the bytes outlive nghttp2's use of them without a copy per call.
public final class PreparedRequest: @unchecked Sendable {
    // @unchecked: every stored property is written only in init; the memory behind the pointers
    // is never mutated afterwards and is freed in deinit.
    public let path: String
    let headers: HeaderBlock
    var nva: UnsafeMutablePointer<nghttp2_nv> { headers.nva }
    var nvCount: Int { headers.count }
    let body: UnsafeMutablePointer<UInt8>
    let bodyCount: Int
    /// The client-side deadline in milliseconds (also sent as `grpc-timeout`), or 0 for none.
    public let timeoutMilliseconds: UInt64

    /// - Parameters:
    ///   - path: `/package.Service/Method`.
    ///   - authority: the `:authority` pseudo-header (`host:port`).
    ///   - message: the serialized request message (without the gRPC prefix).
    ///   - metadata: extra headers, sent as given (lower-case names; values of `-bin` keys must
    ///     already be base64).
    ///   - timeout: seconds; sent as `grpc-timeout` and enforced by the client too.
    public init(path: String, authority: String, message: UnsafeRawBufferPointer,
                metadata: [(String, String)] = [], timeout: Double? = nil,
                userAgent: String = "ubiquity-swift-client/0.1") {
        self.path = path
        var list: [(String, String)] = [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
            ("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", userAgent),
        ]
        if let timeout, timeout.isFinite {
            let ms = max(1, UInt64((max(0, timeout) * 1000).rounded(.up)))
            timeoutMilliseconds = ms
            list.append(("grpc-timeout", GRPCTimeoutEncoding.encode(milliseconds: ms)))
        } else {
            timeoutMilliseconds = 0
        }
        for (k, v) in metadata { list.append((k.lowercased(), v)) }

        headers = HeaderBlock(list)

        bodyCount = 5 + message.count
        body = .allocate(capacity: bodyCount)
        body[0] = 0
        let n = UInt32(message.count)
        body[1] = UInt8(n >> 24); body[2] = UInt8(n >> 16 & 0xFF); body[3] = UInt8(n >> 8 & 0xFF); body[4] = UInt8(n & 0xFF)
        if message.count > 0 {
            UnsafeMutableRawPointer(body + 5).copyMemory(from: message.baseAddress!, byteCount: message.count)
        }
    }

    public convenience init(path: String, authority: String, message: [UInt8],
                            metadata: [(String, String)] = [], timeout: Double? = nil) {
        self.init(path: path, authority: authority, messageBytes: message, metadata: metadata, timeout: timeout)
    }

    private convenience init(path: String, authority: String, messageBytes: [UInt8],
                             metadata: [(String, String)], timeout: Double?) {
        // withUnsafeBytes cannot wrap a delegating init; the bytes are copied inside anyway.
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: messageBytes.count, alignment: 1)
        defer { copy.deallocate() }
        copy.copyBytes(from: messageBytes)
        self.init(path: path, authority: authority, message: UnsafeRawBufferPointer(copy),
                  metadata: metadata, timeout: timeout)
    }

    deinit {
        body.deallocate()
    }
}

/// `grpc-timeout` values: at most 8 digits and a unit.
enum GRPCTimeoutEncoding {
    static func encode(milliseconds ms: UInt64) -> String {
        if ms < 100_000_000 { return "\(ms)m" }
        let s = (ms + 999) / 1000
        if s < 100_000_000 { return "\(s)S" }
        return "\(min(99_999_999, (s + 3599) / 3600))H"
    }
}
