import Foundation
import GRPCCore
import GRPCProtobuf
import SwiftProtobuf

/// A failed call, decoded from its status and the `grpc-status-details-bin` trailer
/// (`google.rpc.Status`): the gRPC code, the stable `ErrorInfo` reason of docs/errors.md, the
/// `BadRequest` field violations, and Ubiquity's own details (conflict records, history and resume
/// tokens). `kind` is chosen from the reason, then the code; nothing is parsed from `message`,
/// which is for people.
///
/// ```swift
/// do { try await context.save() }
/// catch let e as UbiquityError where e.kind == .conflict { print(e.conflicts) }
/// ```
public struct UbiquityError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, for `switch` and `catch ... where`.
    public enum Kind: Sendable, Hashable {
        /// MERGE_CONFLICT (ABORTED): nothing applied; `conflicts` holds the records.
        case conflict
        /// CONSTRAINT_CONFLICT (ABORTED): a uniqueness clash under `.error`; `conflicts` too.
        case constraintConflict
        /// KEY_VERSION_CONFLICT (ABORTED): a key-value write's condition did not hold; nothing
        /// changed; `keyValueConflict` has the key's current state.
        case keyVersionConflict
        /// TRANSITION_IN_PROGRESS (ABORTED): another store transition of the account (a
        /// sign-out, …) is running; nothing changed; retry once it is done.
        case transitionInProgress
        /// HISTORY_EXPIRED: the feed's token is older than retained history; `historyExpired`.
        case historyExpired
        /// GENERATION_EXPIRED or STORE_REPLACED: the token can no longer be read.
        case generationExpired
        case invalidArgument
        case notFound
        case failedPrecondition
        /// UNAUTHENTICATED without one of the reasons below.
        case unauthenticated
        /// MISSING_CREDENTIALS: the call carried no session (a server with accounts, a client
        /// without credentials).
        case missingCredentials
        /// BAD_CREDENTIALS: a sign-in with an API key or device ID that is not valid, or a token
        /// this server did not issue. Signing in again with the same key will not help.
        case badCredentials
        /// SESSION_EXPIRED: the session passed its expiry. A client with an API key signs in
        /// again by itself; a feed's error carries `resumeToken`.
        case sessionExpired
        /// SESSION_REVOKED: signed out, or the API key was revoked.
        case sessionRevoked
        /// PERMISSION_DENIED without the reason below.
        case permissionDenied
        /// SCOPE_EXCEEDED: the API key is read-only, or scoped to another store.
        case scopeExceeded
        /// SIGN_IN_RATE_LIMITED: too many failed sign-ins; `retryAfter` says when to try again.
        case signInRateLimited
        /// ACCOUNT_ARCHIVED (FAILED_PRECONDITION): archiving an account that is archived already;
        /// nothing changed.
        case accountArchived
        /// ACCOUNT_NOT_ARCHIVED (ALREADY_EXISTS): restoring an active account; nothing changed.
        case accountNotArchived
        /// ACCOUNT_BUSY (FAILED_PRECONDITION): another archive, restore or delete of the account
        /// is running, or stopped half-way (retry that one to finish it); nothing changed.
        case accountBusy
        /// DEFAULT_ACCOUNT (FAILED_PRECONDITION): the built-in "default" account cannot be
        /// archived or deleted; nothing changed.
        case defaultAccount
        /// Busy, shutting down, generation not reached: safe to retry.
        case unavailable
        case resourceExhausted
        case deadlineExceeded
        case cancelled
        case unimplemented
        case other
    }

    /// One `google.rpc.BadRequest` field violation.
    public struct Violation: Sendable, Hashable {
        public var field: String
        public var description: String
        public var reason: String
    }

    /// `ubiquity.v1.HistoryExpiredDetails`: where to re-baseline after HISTORY_EXPIRED.
    public struct HistoryExpiredInfo: Sendable, Hashable {
        public var oldestRetainedToken: GenerationToken?
        /// Read a baseline at this token, then subscribe from it.
        public var currentToken: GenerationToken?
        /// `Changes.FetchDeletions` can list the IDs deleted after the old token.
        public var deletionsAvailable: Bool
    }

    public var kind: Kind
    public var code: RPCError.Code
    public var message: String
    /// `ErrorInfo.reason` (docs/errors.md), nil when the server sent none.
    public var reason: String?
    /// `ErrorInfo.metadata` (`field`, `column` for predicate errors, …).
    public var reasonMetadata: [String: String]
    public var violations: [Violation]
    /// Decoded `ConflictDetails` records for `.conflict` and `.constraintConflict`.
    public var conflicts: [Conflict]
    /// The trailer is bounded: when true, save with `conflictsInResponse` to get every record.
    public var conflictsTruncated: Bool
    public var historyExpired: HistoryExpiredInfo?
    /// `KeyValueConflictDetails` of `.keyVersionConflict`: whether the key is set, and its
    /// current version (0 if it was never set).
    public var keyValueConflict: (exists: Bool, currentVersion: Int64)?
    /// `ResumeDetails`: where an ended subscription resumes (drain, SUBSCRIBER_TOO_SLOW).
    public var resumeToken: GenerationToken?
    /// Every detail of the status, for what this type does not decode.
    public var details: [ErrorDetails]
    /// The transport error itself, with the trailers (`metadata`).
    public var rpcError: RPCError

    /// SIGN_IN_RATE_LIMITED's `retry_after_seconds`: how long until a sign-in may succeed.
    public var retryAfter: Duration? {
        reasonMetadata["retry_after_seconds"].flatMap(Int64.init).map { .seconds($0) }
    }

    public var description: String {
        "\(code): \(message)" + (reason.map { " [\($0)]" } ?? "")
    }

    /// Decodes a grpc-swift `RPCError`. Details that do not decode are left out, never fatal: the
    /// code and message alone are still a correct error.
    public init(_ error: RPCError) {
        rpcError = error
        code = error.code
        message = error.message
        reason = nil
        reasonMetadata = [:]
        violations = []
        conflicts = []
        conflictsTruncated = false
        historyExpired = nil
        keyValueConflict = nil
        resumeToken = nil
        kind = .other
        details = ((try? error.unpackGoogleRPCStatus()) ?? nil)?.details ?? []
        for detail in details {
            if let info = detail.errorInfo {
                reason = info.reason
                reasonMetadata = info.metadata
            } else if let bad = detail.badRequest {
                violations = bad.violations.map {
                    Violation(field: $0.field, description: $0.violationDescription, reason: $0.reason)
                }
            } else if let any = detail.any {
                decode(any)
            }
        }
        kind = Self.kind(reason: reason, code: code)
    }

    private mutating func decode(_ any: Google_Protobuf_Any) {
        if let c = try? Ubiquity_V1_ConflictDetails(unpackingAny: any) {
            conflicts = c.conflicts.map(Conflict.init(proto:))
            conflictsTruncated = c.truncated
        } else if let h = try? Ubiquity_V1_HistoryExpiredDetails(unpackingAny: any) {
            historyExpired = HistoryExpiredInfo(
                oldestRetainedToken: GenerationToken(ifPresent: h.oldestRetainedToken),
                currentToken: GenerationToken(ifPresent: h.currentToken),
                deletionsAvailable: h.deletionsAvailable)
        } else if let r = try? Ubiquity_V1_ResumeDetails(unpackingAny: any) {
            resumeToken = GenerationToken(ifPresent: r.resumeToken)
        } else if let k = try? Ubiquity_V1_KeyValueConflictDetails(unpackingAny: any) {
            keyValueConflict = (k.exists, k.currentVersion)
        }
    }

    static func kind(reason: String?, code: RPCError.Code) -> Kind {
        switch reason {
        case "MERGE_CONFLICT": return .conflict
        case "CONSTRAINT_CONFLICT": return .constraintConflict
        case "KEY_VERSION_CONFLICT": return .keyVersionConflict
        case "TRANSITION_IN_PROGRESS": return .transitionInProgress
        case "HISTORY_EXPIRED": return .historyExpired
        case "GENERATION_EXPIRED", "STORE_REPLACED": return .generationExpired
        case "MISSING_CREDENTIALS": return .missingCredentials
        case "BAD_CREDENTIALS": return .badCredentials
        case "SESSION_EXPIRED": return .sessionExpired
        case "SESSION_REVOKED": return .sessionRevoked
        case "SCOPE_EXCEEDED": return .scopeExceeded
        case "SIGN_IN_RATE_LIMITED": return .signInRateLimited
        case "ACCOUNT_ARCHIVED": return .accountArchived
        case "ACCOUNT_NOT_ARCHIVED": return .accountNotArchived
        case "ACCOUNT_BUSY": return .accountBusy
        case "DEFAULT_ACCOUNT": return .defaultAccount
        default: break
        }
        switch code {
        case .invalidArgument: return .invalidArgument
        case .notFound: return .notFound
        case .failedPrecondition: return .failedPrecondition
        case .aborted: return .conflict
        case .unauthenticated: return .unauthenticated
        case .permissionDenied: return .permissionDenied
        case .unavailable: return .unavailable
        case .resourceExhausted: return .resourceExhausted
        case .deadlineExceeded: return .deadlineExceeded
        case .cancelled: return .cancelled
        case .unimplemented: return .unimplemented
        default: return .other
        }
    }

    /// Any error of a call as a `UbiquityError`: an `RPCError` decoded, anything else (a runtime
    /// error of the transport, say) as UNAVAILABLE, the code grpc-swift gives a call that could
    /// not reach the server.
    static func from(_ error: any Error) -> any Error {
        switch error {
        case let e as UbiquityError: return e
        case let e as RPCError: return UbiquityError(e)
        case is CancellationError: return error
        default: return UbiquityError(RPCError(code: .unavailable, message: "\(error)", cause: error))
        }
    }
}
