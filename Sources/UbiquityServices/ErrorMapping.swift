import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// How every error of the engine, the query layer and the services becomes a gRPC status with
// `google.rpc.Status` details (docs/errors.md), in one place. Each error type says which status
// it becomes by adopting the transport's `RPCErrorConvertible`; `MethodTable` converts what a
// handler throws once, around the handler. Anything else ends the call UNKNOWN with an error ID
// (`RPCError(converting:)`, which logs the cause under that ID).

/// An error raised by the services themselves (bad request fields, unknown stores, limits).
struct ServiceError: Error, Sendable {
    var code: StatusCode
    var reason: ErrorReason
    var message: String
    /// BadRequest field violations: (field, description, reason).
    var violations: [(String, String, String)] = []
    var metadata: [String: String] = [:]
    /// Further `google.rpc.Status` details (HistoryExpiredDetails, ResumeDetails).
    var details: [any SwiftProtobuf.Message & Sendable] = []

    static func invalid(_ field: String, _ message: String, reason: ErrorReason) -> ServiceError {
        ServiceError(code: .invalidArgument, reason: reason, message: "\(field): \(message)", violations: [(field, message, reason.rawValue)])
    }
    static func notFound(_ what: String, reason: ErrorReason = .notFound) -> ServiceError {
        ServiceError(code: .notFound, reason: reason, message: what)
    }
    static func precondition(_ message: String, reason: ErrorReason) -> ServiceError {
        ServiceError(code: .failedPrecondition, reason: reason, message: message)
    }
    static func exhausted(_ message: String, reason: ErrorReason) -> ServiceError {
        ServiceError(code: .resourceExhausted, reason: reason, message: message)
    }
}

extension ServiceError: RPCErrorConvertible {
    var rpcError: RPCError {
        ServiceErrors.build(code, message, reason: reason, violations: violations, metadata: metadata, details: details)
    }
}

extension QueryError: RPCErrorConvertible {
    /// `field` as the request names it: the proto field name, under the prefix where the query
    /// sits in the request (`fetch.` for a FetchSpec; `MethodTable`'s `queryFields`).
    func rpcError(fieldPrefix: String) -> RPCError {
        let field = fieldPrefix + ServiceErrors.snakeCase(self.field.isEmpty ? "predicate" : self.field)
        let reason: ErrorReason
        var code = StatusCode.invalidArgument
        switch self.reason {
        case .syntax: reason = .predicateSyntax
        case .unknownEntity: reason = .unknownEntity
        case .unknownKeyPath: reason = .unknownKeyPath
        case .typeMismatch: reason = .typeMismatch
        case .unboundVariable: reason = .unboundVariable
        case .limitExceeded:
            reason = .limitExceeded
            // too many results (not an oversized predicate): the request is fine, the answer too big
            if field.hasSuffix("fetch_limit") || field.hasSuffix("object_ids") { code = .resourceExhausted }
        case .unsupported: reason = .unsupported
        }
        var md: [String: String] = ["field": field]
        if let c = column { md["column"] = String(c) }
        // the query layer's messages already say "at column N" where they have a column
        return ServiceErrors.build(code, "\(field): \(message)", reason: reason, violations: [(field, message, reason.rawValue)], metadata: md)
    }

    public var rpcError: RPCError { rpcError(fieldPrefix: "") }
}

extension StorageError: RPCErrorConvertible {
    public var rpcError: RPCError { rpcError(model: nil) }

    /// The status; `model` types the values of conflict records (a save knows its store's model:
    /// `SaveFailure` carries it).
    func rpcError(model: ModelInfo?) -> RPCError {
        let code: StatusCode
        let reason: ErrorReason
        var violations: [(String, String, String)] = []
        var conflicts: [ConflictRecord] = []
        var message = self.message
        switch self.reason {
        case .busy: (code, reason) = (.unavailable, .busy)
        case .io: (code, reason) = (.unavailable, .ioError)
        case .storeClosed: (code, reason) = (.unavailable, .storeClosed)
        case .generationNotReached: (code, reason) = (.unavailable, .generationNotReached)
        case .directoryLocked: (code, reason) = (.unavailable, .dataDirectoryLocked)
        case .full: (code, reason) = (.resourceExhausted, .storageFull)
        case .corrupt: (code, reason) = (.dataLoss, .corrupt)
        case .generationExpired: (code, reason) = (.failedPrecondition, .generationExpired)
        case .storeReplaced: (code, reason) = (.failedPrecondition, .storeReplaced)
        case .historyExpired: (code, reason) = (.failedPrecondition, .historyExpired)
        case .modelVersionMismatch: (code, reason) = (.failedPrecondition, .modelVersionMismatch)
        case .noModel: (code, reason) = (.failedPrecondition, .noModel)
        case .migrationNotInferable(let why):
            (code, reason) = (.failedPrecondition, .migrationNotInferable)
            message += ": " + why.joined(separator: "; ")
        case .mergeConflict(let c), .constraintConflict(let c):
            if case .mergeConflict = self.reason { (code, reason) = (.aborted, .mergeConflict) } else { (code, reason) = (.aborted, .constraintConflict) }
            conflicts = c
            if !c.isEmpty { message += " (\(c.count) conflicting object\(c.count == 1 ? "" : "s"); details in ubiquity.v1.ConflictDetails)" }
        case .validationFailed(let issues):
            (code, reason) = (.invalidArgument, .validationFailed)
            violations = issues.map { i in
                let field = i.field ?? [i.object, i.entity, i.property].compactMap { $0 }.joined(separator: ".")
                return (field, i.message, i.code.rawValue)
            }
            message += ": " + issues.prefix(5).map(\.description).joined(separator: "; ")
        case .notFound: (code, reason) = (.notFound, .notFound)
        case .invalidArgument: (code, reason) = (.invalidArgument, .invalidArgument)
        case .tokenOfAnotherStore: (code, reason) = (.invalidArgument, .badToken)
        case .readOnly: (code, reason) = (.internal, .readOnly)
        case .internalError: (code, reason) = (.internal, .internal)
        case .cancelled: (code, reason) = (.cancelled, .cancelled)
        }
        return ServiceErrors.build(code, message, reason: reason, violations: violations, conflicts: conflicts, model: model)
    }
}

/// A failed save with the model of its store, so conflict records carry typed values.
struct SaveFailure: Error, RPCErrorConvertible {
    let error: StorageError
    let model: ModelInfo?
    var rpcError: RPCError { error.rpcError(model: model) }
}

enum ServiceErrors {
    static let domain = "ubiquity.dev"

    /// What a handler threw, as the status the call ends with: query errors named by their
    /// request field (`queryFields`: where the query sits in the request, e.g. "fetch."), domain
    /// errors through their `RPCErrorConvertible` conformance. An unexpected error is UNKNOWN
    /// with an error ID (the cause goes to the log) and, like every status of these services,
    /// ErrorInfo details.
    static func rpcError(_ error: any Error, queryFields: String = "") -> RPCError {
        if let e = error as? QueryError { return e.rpcError(fieldPrefix: queryFields) }
        var status = RPCError(converting: error)
        if status.code == .unknown && status.details == nil {
            let cause = status.cause
            status = build(.unknown, status.message, reason: .unknown)
            status.cause = cause
        }
        return status
    }

    /// The proto field name of a Swift property name: `havingPredicate` → `having_predicate`.
    static func snakeCase(_ s: String) -> String {
        var out = ""
        for ch in s.replacingOccurrences(of: "IDs", with: "Ids").replacingOccurrences(of: "ID", with: "Id") {
            if ch.isUppercase { out += "_" + ch.lowercased() } else { out.append(ch) }
        }
        return out
    }

    /// The status with its `google.rpc.Status` details: ErrorInfo always, BadRequest for
    /// violations, ConflictDetails for conflicts, all within `ErrorBounds`.
    static func build(_ code: StatusCode, _ message: String, reason: ErrorReason, violations: [(String, String, String)] = [],
                      metadata: [String: String] = [:], conflicts: [ConflictRecord] = [], model: ModelInfo? = nil,
                      details: [any SwiftProtobuf.Message] = []) -> RPCError {
        var message = StatusTrailers.fitting(message, encodedLimit: ErrorBounds.maxMessageBytes)
        var status = Google_Rpc_Status()
        status.code = Int32(code.rawValue)
        var info = Google_Rpc_ErrorInfo()
        info.reason = reason.rawValue
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
        for d in details { if let a = try? Google_Protobuf_Any(message: d) { status.details.append(a) } }
        status.message = message
        let bytes = (try? status.serializedBytes() as [UInt8]) ?? []
        return RPCError(code, message, details: bytes)
    }
}
