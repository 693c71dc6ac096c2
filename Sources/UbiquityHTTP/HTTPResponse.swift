/// A complete HTTP/1.1 response (this server never streams: a scrape is rendered, then sent).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func text(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The bytes on the wire; `close` adds `Connection: close`.
    func serialized(close: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n"
        if close { head += "Connection: close\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }
}

/// What a GET answers, by path; everything else is 404 (unknown path) or 405 (other methods).
/// The handlers run on the HTTP server's loop thread.
public struct HTTPRoutes: Sendable {
    private var handlers: [String: @Sendable () -> HTTPResponse] = [:]

    public init() {}

    public mutating func get(_ path: String, _ handler: @escaping @Sendable () -> HTTPResponse) {
        handlers[path] = handler
    }

    public func respond(to request: HTTPRequest) -> HTTPResponse {
        guard let handler = handlers[String(request.path)] else {
            return .text(404, "not found: only \(handlers.keys.sorted().joined(separator: ", ")) are served\n")
        }
        // HEAD would need a body-less variant of every handler; scrapers only GET.
        guard request.method == "GET" else {
            return .text(405, "method \(request.method) not allowed: use GET\n", headers: [("Allow", "GET")])
        }
        return handler()
    }
}
