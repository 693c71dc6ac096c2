import CHTTPParser

/// One HTTP/1.1 request as far as this server cares: the method, the target, and whether the
/// client wants the connection kept open.
public struct HTTPRequest: Equatable, Sendable {
    public var method: String
    public var target: String
    public var keepAlive: Bool

    public init(method: String, target: String, keepAlive: Bool) {
        self.method = method
        self.target = target
        self.keepAlive = keepAlive
    }

    /// The target without its query string (`/metrics?x=1` is `/metrics`).
    public var path: Substring {
        target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }
}

/// Bytes in, requests out: Debian's http_parser (libhttp-parser) does the HTTP/1.1 grammar,
/// this bounds what one request may cost. Bodies are parsed and dropped (a GET has none; the
/// bound still applies to them). Not thread-safe: one per connection, on its loop.
public final class HTTPRequestParser {
    public enum Failure: Error, Equatable, Sendable {
        /// Not HTTP/1.x, or malformed: answer 400 and close.
        case malformed(String)
        /// Request line, headers and body over `maxRequestBytes`: answer 431 and close.
        case tooLarge
    }

    /// Most bytes one request (line, headers, body) may take.
    public let maxRequestBytes: Int
    private let parser: UnsafeMutablePointer<http_parser>
    private var settings = http_parser_settings()
    // Filled by the C callbacks during `feed`.
    fileprivate var url: [UInt8] = []
    fileprivate var completed: [HTTPRequest] = []
    private var bytesInRequest = 0
    private var failed: Failure?

    public init(maxRequestBytes: Int = 8192) {
        self.maxRequestBytes = maxRequestBytes
        parser = .allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        http_parser_settings_init(&settings)
        settings.on_message_begin = { p in
            HTTPRequestParser.owner(p).url.removeAll(keepingCapacity: true)
            return 0
        }
        settings.on_url = { p, at, n in
            guard let p, let at else { return 1 }
            let me = HTTPRequestParser.owner(p)
            me.url.append(contentsOf: UnsafeRawBufferPointer(start: at, count: n))
            return 0
        }
        settings.on_message_complete = { p in
            guard let p else { return 1 }
            let me = HTTPRequestParser.owner(p)
            let method = String(cString: http_method_str(http_method(rawValue: ubq_http_parser_method(p))))
            me.completed.append(HTTPRequest(method: method, target: String(decoding: me.url, as: UTF8.self),
                                            keepAlive: http_should_keep_alive(p) != 0))
            return 0
        }
    }

    deinit { parser.deallocate() }

    fileprivate static func owner(_ p: UnsafeMutablePointer<http_parser>?) -> HTTPRequestParser {
        Unmanaged<HTTPRequestParser>.fromOpaque(p!.pointee.data).takeUnretainedValue()
    }

    /// Feeds bytes read from the connection; returns the requests they completed, in order.
    /// After a failure every later call fails the same way (the connection is to be closed).
    public func feed(_ bytes: UnsafeRawBufferPointer) -> Result<[HTTPRequest], Failure> {
        if let failed { return .failure(failed) }
        completed.removeAll(keepingCapacity: true)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        defer { parser.pointee.data = nil }
        var offset = 0
        while offset < bytes.count {
            // Feed at most what the current request may still take, so an oversized request is
            // refused before the parser has seen (and we have buffered) more than the bound.
            let room = maxRequestBytes - bytesInRequest
            if room <= 0 { return fail(.tooLarge) }
            let n = min(room, bytes.count - offset)
            let before = completed.count
            let chunk = bytes.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self)
            let used = http_parser_execute(parser, &settings, chunk, n)
            let err = ubq_http_parser_errno(parser)
            if err != HPE_OK.rawValue {
                let name = String(cString: http_errno_name(http_errno(rawValue: err)))
                return fail(.malformed(name))
            }
            if parser.pointee.upgrade != 0 { return fail(.malformed("upgrade not supported")) }
            // Bytes after the last completed request belong to the next one.
            bytesInRequest = completed.count > before ? 0 : bytesInRequest + used
            offset += used
            if used < n { return fail(.malformed("parser stopped early")) }
        }
        return .success(completed)
    }

    private func fail(_ f: Failure) -> Result<[HTTPRequest], Failure> {
        failed = f
        return .failure(f)
    }
}
