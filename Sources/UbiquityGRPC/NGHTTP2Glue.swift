#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import UbiquityLoop

/// Where `NGHTTP2Glue.pump` puts frames: a write batch with one write in flight.
public protocol FrameSink: AnyObject {
    /// Bytes written and not yet taken by the kernel.
    var queuedWriteBytes: Int { get }
    func write(_ bytes: UnsafeRawBufferPointer)
    /// Starts a write of the batch unless one is in flight.
    func flush()
}

extension TCPConnection: FrameSink {}

/// nghttp2 plumbing shared by the server's `HTTP2Connection` and the client connection in
/// `UbiquityGRPCClient`: both drive a session by `mem_recv` / `mem_send` over a `TCPConnection`.
public enum NGHTTP2Glue {
    /// Pulls frames from `session` (`nghttp2_session_mem_send`) into `tcp`'s write batch until it
    /// holds `limit` bytes or nghttp2 has nothing more to send, then starts a write (at most one
    /// is in flight). Returns false on a fatal nghttp2 error; the caller closes the connection.
    /// Loop thread only, and never from inside an nghttp2 callback (nghttp2 is not re-entrant).
    public static func pump(_ session: OpaquePointer, into tcp: some FrameSink, limit: Int) -> Bool {
        while tcp.queuedWriteBytes < limit {
            var ptr: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &ptr)
            if n < 0 { return false }
            if n == 0 { break }
            tcp.write(UnsafeRawBufferPointer(start: ptr, count: n))
        }
        tcp.flush()
        return true
    }

    /// Whether `bytes` spell exactly `literal` (header names and well-known values, compared
    /// without making a String).
    public static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && (bytes.count == 0 || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
    }

    /// Length of the gRPC message whose 5-byte prefix starts at `p` (byte 0: compressed flag,
    /// bytes 1–4: big-endian length).
    public static func messageLength(_ p: UnsafePointer<UInt8>) -> Int {
        Int(p[1]) << 24 | Int(p[2]) << 16 | Int(p[3]) << 8 | Int(p[4])
    }
}

/// An nghttp2 header array over one byte buffer, built once and handed to nghttp2 any number of
/// times without copies (`NGHTTP2_NV_FLAG_NO_COPY_*`): whoever submits it keeps it alive until
/// nghttp2 has sent the frame. Immutable after init.
public final class HeaderBlock: @unchecked Sendable {
    // @unchecked: written only in init; the memory is never mutated afterwards, freed in deinit.
    public let nva: UnsafeMutablePointer<nghttp2_nv>
    public let count: Int
    private let bytes: UnsafeMutablePointer<UInt8>

    public init(_ headers: [(String, String)]) {
        let total = headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }
        bytes = .allocate(capacity: max(1, total))
        count = headers.count
        nva = .allocate(capacity: max(1, headers.count))
        var offset = 0
        let flags = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        for (i, (name, value)) in headers.enumerated() {
            let n0 = offset
            for b in name.utf8 { bytes[offset] = b; offset += 1 }
            let v0 = offset
            for b in value.utf8 { bytes[offset] = b; offset += 1 }
            nva[i] = nghttp2_nv(name: bytes + n0, value: bytes + v0, namelen: v0 - n0, valuelen: offset - v0, flags: flags)
        }
    }

    deinit {
        bytes.deallocate()
        nva.deallocate()
    }
}

/// Calls `body` with an nghttp2 header array pointing into one contiguous copy of `headers`.
public func withHeaderArray<R>(_ headers: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
    var bytes = [UInt8]()
    var spans: [(Int, Int, Int, Int)] = []
    spans.reserveCapacity(headers.count)
    for (name, value) in headers {
        let n0 = bytes.count
        bytes.append(contentsOf: name.utf8)
        let v0 = bytes.count
        bytes.append(contentsOf: value.utf8)
        spans.append((n0, v0 - n0, v0, bytes.count - v0))
    }
    return bytes.withUnsafeMutableBufferPointer { buf in
        let base = buf.baseAddress ?? UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        let nva = spans.map { s in
            nghttp2_nv(name: base + s.0, value: base + s.2, namelen: s.1, valuelen: s.3,
                       flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        }
        return nva.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
    }
}

/// A few recently made Strings, handed back when the same bytes come again (a connection sends
/// the same `:path` and `user-agent` on every call). Bounded; one per connection, loop thread only.
struct RecentStrings {
    private var entries: [String] = []
    private var next = 0
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        for s in entries where Self.matches(s, bytes) { return s }
        let s = String(decoding: bytes, as: UTF8.self)
        if entries.count < capacity {
            entries.append(s)
        } else {
            entries[next] = s
            next = (next + 1) % capacity
        }
        return s
    }

    private static func matches(_ s: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard s.utf8.count == bytes.count else { return false }
        guard let base = bytes.baseAddress else { return true }
        return s.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, base, bytes.count) == 0 }
            ?? s.utf8.elementsEqual(bytes)
    }
}
