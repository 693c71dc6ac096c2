import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// An error raised by the services themselves (bad request fields, unknown stores, limits).
/// Every error a service returns — its own, the engine's and the query layer's — leaves through
/// `ServiceErrors.rpcError`, which adds `google.rpc.Status` details (docs/errors.md).
struct ServiceError: Error, Sendable {
    var code: StatusCode
    var reason: String
    var message: String
    /// BadRequest field violations: (field, description, reason).
    var violations: [(String, String, String)] = []
    var metadata: [String: String] = [:]

    static func invalid(_ field: String, _ message: String, reason: String) -> ServiceError {
        ServiceError(code: .invalidArgument, reason: reason, message: "\(field): \(message)", violations: [(field, message, reason)])
    }
    static func notFound(_ what: String, reason: String = "NOT_FOUND") -> ServiceError {
        ServiceError(code: .notFound, reason: reason, message: what)
    }
    static func precondition(_ message: String, reason: String) -> ServiceError {
        ServiceError(code: .failedPrecondition, reason: reason, message: message)
    }
    static func exhausted(_ message: String, reason: String) -> ServiceError {
        ServiceError(code: .resourceExhausted, reason: reason, message: message)
    }
}

enum ServiceErrors {
    static let domain = "ubiquity.dev"

    /// Runs a handler body, turning any error into an RPCError with google.rpc.Status details.
    /// `queryFields`: where the query layer's fields sit in the request (e.g. "fetch." for a
    /// FetchSpec), so BadRequest names the request's own field (`fetch.predicate`).
    static func mapping<T>(model: ModelInfo? = nil, queryFields: String = "", _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw rpcError(error, model: model, queryFields: queryFields) }
    }

    /// `mapping` for synchronous handlers.
    static func mappingSync<T>(model: ModelInfo? = nil, queryFields: String = "", _ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw rpcError(error, model: model, queryFields: queryFields) }
    }

    static func rpcError(_ error: Error, model: ModelInfo? = nil, queryFields: String = "") -> Error {
        switch error {
        case let e as RPCError: return e
        case let e as ServiceError:
            return build(e.code, e.message, reason: e.reason, violations: e.violations, metadata: e.metadata)
        case var e as QueryError:
            e.field = queryFields + snakeCase(e.field.isEmpty ? "predicate" : e.field)
            return queryError(e)
        case let e as StorageError:
            return storageError(e, model: model)
        case is CancellationError:
            return RPCError(.cancelled, "the call was cancelled")
        default:
            return build(.internal, "internal error: \(error)", reason: "INTERNAL")
        }
    }

    /// The proto field name of a Swift property name: `havingPredicate` → `having_predicate`.
    static func snakeCase(_ s: String) -> String {
        var out = ""
        for ch in s.replacingOccurrences(of: "IDs", with: "Ids").replacingOccurrences(of: "ID", with: "Id") {
            if ch.isUppercase { out += "_" + ch.lowercased() } else { out.append(ch) }
        }
        return out
    }

    static func queryError(_ e: QueryError) -> RPCError {
        let field = e.field.isEmpty ? "predicate" : e.field
        let reason: String
        var code = StatusCode.invalidArgument
        switch e.reason {
        case .syntax: reason = "PREDICATE_SYNTAX"
        case .unknownEntity: reason = "UNKNOWN_ENTITY"
        case .unknownKeyPath: reason = "UNKNOWN_KEY_PATH"
        case .typeMismatch: reason = "TYPE_MISMATCH"
        case .unboundVariable: reason = "UNBOUND_VARIABLE"
        case .limitExceeded:
            reason = "LIMIT_EXCEEDED"
            // too many results (not an oversized predicate): the request is fine, the answer too big
            if field.hasSuffix("fetch_limit") || field.hasSuffix("object_ids") { code = .resourceExhausted }
        case .unsupported: reason = "UNSUPPORTED"
        }
        var md: [String: String] = ["field": field]
        if let c = e.column { md["column"] = String(c) }
        // the query layer's messages already say "at column N" where they have a column
        return build(code, "\(field): \(e.message)", reason: reason, violations: [(field, e.message, reason)], metadata: md)
    }

    static func storageError(_ e: StorageError, model: ModelInfo?) -> RPCError {
        let code: StatusCode
        var violations: [(String, String, String)] = []
        var conflicts: [ConflictRecord] = []
        var message = e.message
        switch e.reason {
        case .busy, .io, .storeClosed, .generationNotReached: code = .unavailable
        case .full: code = .resourceExhausted
        case .corrupt: code = .dataLoss
        case .generationExpired, .storeReplaced, .historyExpired, .modelVersionMismatch, .noModel: code = .failedPrecondition
        case .migrationNotInferable(let why):
            code = .failedPrecondition
            message += ": " + why.joined(separator: "; ")
        case .mergeConflict(let c), .constraintConflict(let c):
            code = .aborted
            conflicts = c
            if !c.isEmpty { message += " (\(c.count) conflicting object\(c.count == 1 ? "" : "s"); details in ubiquity.v1.ConflictDetails)" }
        case .validationFailed(let issues):
            code = .invalidArgument
            violations = issues.map { i in
                let field = i.field ?? [i.object, i.entity, i.property].compactMap { $0 }.joined(separator: ".")
                return (field, i.message, i.code.rawValue)
            }
            message += ": " + issues.prefix(5).map(\.description).joined(separator: "; ")
        case .notFound: code = .notFound
        case .invalidArgument, .tokenOfAnotherStore: code = .invalidArgument
        case .readOnly, .internalError: code = .internal
        case .cancelled: code = .cancelled
        case .directoryLocked: code = .unavailable
        }
        return build(code, message, reason: e.reason.name, violations: violations, conflicts: conflicts, model: model)
    }

    static func build(_ code: StatusCode, _ message: String, reason: String, violations: [(String, String, String)] = [],
                      metadata: [String: String] = [:], conflicts: [ConflictRecord] = [], model: ModelInfo? = nil) -> RPCError {
        var message = StatusTrailers.fitting(message, encodedLimit: ErrorBounds.maxMessageBytes)
        var status = Google_Rpc_Status()
        status.code = Int32(code.rawValue)
        var info = Google_Rpc_ErrorInfo()
        info.reason = reason
        info.domain = domain
        info.metadata = metadata.mapValues { ErrorBounds.clip($0, ErrorBounds.maxFieldCharacters) }
        if let a = try? Google_Protobuf_Any(message: info) { status.details.append(a) }
        if !violations.isEmpty {
            var br = Google_Rpc_BadRequest()
            br.fieldViolations = ErrorBounds.violations(violations).map { f, d, r in
                var v = Google_Rpc_BadRequest.FieldViolation()
                v.field = f; v.description_p = d; v.reason = r
                return v
            }
            if let a = try? Google_Protobuf_Any(message: br) { status.details.append(a) }
        }
        if !conflicts.isEmpty {
            let records = conflicts.map { Convert.conflict($0, model: model) }
            // What the details hold so far, the message (the status holds it too) and its note below.
            let room = ErrorBounds.maxDetailsBytes - ((try? status.serializedBytes() as [UInt8])?.count ?? 0) - message.utf8.count - 256
            let cd = ErrorBounds.conflictDetails(records, room: room)
            if cd.truncated {
                message += " (the details hold \(cd.conflicts.count) of the \(records.count) conflict records, some without values; "
                    + "set conflicts_in_response on the save to receive them all in the response)"
            }
            if let a = try? Google_Protobuf_Any(message: cd) { status.details.append(a) }
        }
        status.message = message
        let bytes = (try? status.serializedBytes() as [UInt8]) ?? []
        return RPCError(code, message, details: bytes)
    }
}

/// Bounds on what an error may echo back (issue 15). Errors quote the request (an unknown entity
/// name, a bad attribute, a conflicting object's values), and an unbounded echo once produced
/// trailers no client accepts: grpcio refuses header lists past 8–16 KiB and reports
/// RESOURCE_EXHAUSTED instead of the real status, and nghttp2 does not send a header block past
/// 64 KiB at all. The transport has its own last-resort bound (UbiquityGRPC's StatusTrailers);
/// these keep every detail message well inside it, so the typed details always arrive.
enum ErrorBounds {
    /// The message (grpc-message and google.rpc.Status.message), in bytes once percent-encoded:
    /// under the transport's own cap (StatusTrailers.maxMessageBytes) with room for the note a
    /// truncated ConflictDetails adds, so the two copies of the message stay equal.
    static let maxMessageBytes = 800
    /// A BadRequest field path or an ErrorInfo metadata value, in characters.
    static let maxFieldCharacters = 200
    /// A BadRequest violation's description, in characters.
    static let maxDescriptionCharacters = 300
    /// BadRequest violations listed, and the bytes they may take together; past either, a last
    /// violation counts the rest.
    static let maxViolations = 20
    static let maxViolationBytes = 2048
    /// The serialized google.rpc.Status (before base64: ~5.4 KiB on the wire).
    static let maxDetailsBytes = 4 * 1024

    /// `s`, cut to `limit` characters with a marker saying how much was left out.
    static func clip(_ s: String, _ limit: Int) -> String {
        // Unicode scalars, not Characters: one Character can hold any number of combining marks.
        guard s.utf8.count > limit, s.unicodeScalars.count > limit else { return s }
        let kept = String(String.UnicodeScalarView(s.unicodeScalars.prefix(limit)))
        return "\(kept)... [\(s.utf8.count - kept.utf8.count) more bytes]"
    }

    /// The violations, each clipped, while they fit `maxViolations` and `maxViolationBytes`; then
    /// one more that counts those left out.
    static func violations(_ all: [(String, String, String)]) -> [(String, String, String)] {
        let clipped = all.prefix(maxViolations + 1).map { f, d, r in (clip(f, maxFieldCharacters), clip(d, maxDescriptionCharacters), r) }
        func size(_ v: (String, String, String)) -> Int { v.0.utf8.count + v.1.utf8.count + v.2.utf8.count }
        if all.count <= maxViolations && clipped.reduce(0, { $0 + size($1) }) <= maxViolationBytes { return clipped }
        // Not all fit: keep a slot for the count of the rest.
        var out: [(String, String, String)] = []
        var used = 0
        for v in clipped {
            guard out.count < maxViolations - 1, used + size(v) <= maxViolationBytes else { break }
            out.append(v)
            used += size(v)
        }
        if out.count < all.count {
            out.append(("", "\(all.count - out.count) more violations not listed", all[out.count].2))
        }
        return out
    }

    /// As many whole records as fit in `room` serialized bytes, then records without their
    /// values (the IDs, versions and constraint still say which object clashed and why) while
    /// those fit. `truncated` and `totalConflicts` say when something was left out; the client
    /// can ask for every record in the response body instead (`conflicts_in_response`).
    static func conflictDetails(_ records: [Ubiquity_V1_ConflictRecord], room: Int) -> Ubiquity_V1_ConflictDetails {
        var cd = Ubiquity_V1_ConflictDetails()
        cd.totalConflicts = Int32(records.count)
        var used = 8
        for record in records {
            var r = record
            var size = (try? r.serializedBytes() as [UInt8])?.count ?? Int.max
            if used + size + 4 > room {
                r.clientSnapshot = [:]
                r.clientChanges = [:]
                r.storeValues = [:]
                r.objectID = clip(r.objectID, maxFieldCharacters)
                r.temporaryID = clip(r.temporaryID, maxFieldCharacters)
                r.entity = clip(r.entity, maxFieldCharacters)
                r.constraint = r.constraint.prefix(8).map { clip($0, maxFieldCharacters) }
                cd.truncated = true
                size = (try? r.serializedBytes() as [UInt8])?.count ?? Int.max
                if used + size + 4 > room { break }
            }
            cd.conflicts.append(r)
            used += size + 4
        }
        if cd.conflicts.count < records.count { cd.truncated = true }
        return cd
    }
}
