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
        var status = Google_Rpc_Status()
        status.code = Int32(code.rawValue)
        status.message = message
        var info = Google_Rpc_ErrorInfo()
        info.reason = reason
        info.domain = domain
        info.metadata = metadata
        if let a = try? Google_Protobuf_Any(message: info) { status.details.append(a) }
        if !violations.isEmpty {
            var br = Google_Rpc_BadRequest()
            br.fieldViolations = violations.map { f, d, r in
                var v = Google_Rpc_BadRequest.FieldViolation()
                v.field = f; v.description_p = d; v.reason = r
                return v
            }
            if let a = try? Google_Protobuf_Any(message: br) { status.details.append(a) }
        }
        if !conflicts.isEmpty {
            var cd = Ubiquity_V1_ConflictDetails()
            cd.conflicts = conflicts.map { Convert.conflict($0, model: model) }
            if let a = try? Google_Protobuf_Any(message: cd) { status.details.append(a) }
        }
        let bytes = (try? status.serializedBytes() as [UInt8]) ?? []
        return RPCError(code, message, details: bytes)
    }
}
