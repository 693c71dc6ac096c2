import Logging

/// A gRPC status code. A struct over a raw value so unknown codes from peers survive a round trip.
public struct StatusCode: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let ok = StatusCode(rawValue: 0)
    public static let cancelled = StatusCode(rawValue: 1)
    public static let unknown = StatusCode(rawValue: 2)
    public static let invalidArgument = StatusCode(rawValue: 3)
    public static let deadlineExceeded = StatusCode(rawValue: 4)
    public static let notFound = StatusCode(rawValue: 5)
    public static let alreadyExists = StatusCode(rawValue: 6)
    public static let permissionDenied = StatusCode(rawValue: 7)
    public static let resourceExhausted = StatusCode(rawValue: 8)
    public static let failedPrecondition = StatusCode(rawValue: 9)
    public static let aborted = StatusCode(rawValue: 10)
    public static let outOfRange = StatusCode(rawValue: 11)
    public static let unimplemented = StatusCode(rawValue: 12)
    public static let `internal` = StatusCode(rawValue: 13)
    public static let unavailable = StatusCode(rawValue: 14)
    public static let dataLoss = StatusCode(rawValue: 15)
    public static let unauthenticated = StatusCode(rawValue: 16)

    public var description: String {
        let names = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                     "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                     "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                     "UNAUTHENTICATED"]
        return rawValue >= 0 && rawValue < names.count ? names[rawValue] : "CODE(\(rawValue))"
    }
}

/// The status a call ends with, and the error a handler throws to end it with one other than OK.
/// One type from handler to trailers (grpc-swift 2's `RPCError` is the model): what a handler
/// throws is what the transport sends.
///
/// `details` is a serialized `google.rpc.Status` sent as `grpc-status-details-bin`; the transport
/// does not interpret it (the services layer builds it). `metadata` goes out as trailers.
/// `cause` is the error this one was made from, kept for logs: it is never sent.
public struct RPCError: Error, Sendable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String
    public var details: [UInt8]?
    public var metadata: Metadata
    public var cause: (any Error)?

    public init(_ code: StatusCode, _ message: String = "", details: [UInt8]? = nil, metadata: Metadata = Metadata(),
                cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.metadata = metadata
        self.cause = cause
    }

    /// A successful call's status (code OK; a successful call's trailers are `RPCError(.ok, metadata:)`).
    public static let ok = RPCError(.ok)

    public var description: String { "\(code): \(message)" }

    /// The status for whatever a handler threw: an `RPCError` as it is; an `RPCErrorConvertible`
    /// as it says; cancellation as CANCELLED. Anything else is a bug the client cannot act on:
    /// it becomes UNKNOWN with a generic message naming an error ID, and the error itself goes to
    /// the log under that ID (a Swift description can hold paths, SQL or values of other calls).
    public init(converting error: any Error) {
        self.init(converting: error, logger: UnexpectedErrors.logger)
    }

    init(converting error: any Error, logger: Logger) {
        switch error {
        case let e as RPCError:
            self = e
        case let e as RPCErrorConvertible:
            self = e.rpcError
            if cause == nil { cause = e }
        case is CancellationError:
            self.init(.cancelled, "the call was cancelled", cause: error)
        default:
            let id = UnexpectedErrors.newID()
            logger.error("unexpected error in a handler", metadata: ["error_id": "\(id)", "error": "\(String(reflecting: error))"])
            self.init(.unknown, "internal error (id \(id))", cause: error)
        }
    }
}

/// Errors of other layers say which status they become by adopting this protocol. Anything else a
/// handler throws ends the call with UNKNOWN (never silently INTERNAL; `RPCError(converting:)`).
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}

/// Where `RPCError(converting:)` reports the errors it hides from clients.
enum UnexpectedErrors {
    /// swift-log's global handler (the server bootstraps it) decides where this goes.
    static let logger = Logger(label: "ubiquity.grpc.errors")

    /// 16 hex digits: unique enough to find one line in a server's log.
    static func newID() -> String {
        let n = UInt64.random(in: 0...UInt64.max)
        let hex = String(n, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// Percent-encoding of `grpc-message` (gRPC HTTP/2 protocol): bytes outside 0x20...0x7E and '%'
/// itself become %XX of the UTF-8 encoding.
public enum PercentEncoding {
    public static func encode(_ s: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(s.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            if b >= 0x20 && b <= 0x7E && b != UInt8(ascii: "%") {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ s: String) -> String {
        var out = [UInt8]()
        let bytes = Array(s.utf8)
        var i = 0
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
