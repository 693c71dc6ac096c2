/// The stable reasons of `google.rpc.ErrorInfo` (docs/errors.md lists each with its code, when it
/// happens and what to do; `ErrorReasonDocsTests` keeps the two in step). Clients branch on these,
/// so a reason is never renamed; a new one is added here and in the docs together.
enum ErrorReason: String, CaseIterable, Sendable {
    // INVALID_ARGUMENT
    case missingField = "MISSING_FIELD"
    case badStoreID = "BAD_STORE_ID"
    case badContextID = "BAD_CONTEXT_ID"
    case badObjectID = "BAD_OBJECT_ID"
    case badToken = "BAD_TOKEN"
    case badValue = "BAD_VALUE"
    case badEnum = "BAD_ENUM"
    case badName = "BAD_NAME"
    case duplicateID = "DUPLICATE_ID"
    case unknownEntity = "UNKNOWN_ENTITY"
    case unknownProperty = "UNKNOWN_PROPERTY"
    case abstractEntity = "ABSTRACT_ENTITY"
    case danglingReference = "DANGLING_REFERENCE"
    case validationFailed = "VALIDATION_FAILED"
    case predicateSyntax = "PREDICATE_SYNTAX"
    case unknownKeyPath = "UNKNOWN_KEY_PATH"
    case typeMismatch = "TYPE_MISMATCH"
    case unboundVariable = "UNBOUND_VARIABLE"
    case unsupported = "UNSUPPORTED"
    case limitExceeded = "LIMIT_EXCEEDED"
    case invalidArgument = "INVALID_ARGUMENT"
    // NOT_FOUND
    case storeNotFound = "STORE_NOT_FOUND"
    case contextNotFound = "CONTEXT_NOT_FOUND"
    case objectNotFound = "OBJECT_NOT_FOUND"
    case notFound = "NOT_FOUND"
    // UNAUTHENTICATED
    case missingCredentials = "MISSING_CREDENTIALS"
    case badCredentials = "BAD_CREDENTIALS"
    case sessionExpired = "SESSION_EXPIRED"
    case sessionRevoked = "SESSION_REVOKED"
    // PERMISSION_DENIED
    case scopeExceeded = "SCOPE_EXCEEDED"
    // FAILED_PRECONDITION
    case noModel = "NO_MODEL"
    case modelVersionMismatch = "MODEL_VERSION_MISMATCH"
    case migrationNotInferable = "MIGRATION_NOT_INFERABLE"
    case generationExpired = "GENERATION_EXPIRED"
    case storeReplaced = "STORE_REPLACED"
    case historyExpired = "HISTORY_EXPIRED"
    case storeChanged = "STORE_CHANGED"
    // ABORTED
    case mergeConflict = "MERGE_CONFLICT"
    case constraintConflict = "CONSTRAINT_CONFLICT"
    // UNAVAILABLE
    case generationNotReached = "GENERATION_NOT_REACHED"
    case busy = "BUSY"
    case storeBusy = "STORE_BUSY"
    case storeClosed = "STORE_CLOSED"
    case ioError = "IO_ERROR"
    case dataDirectoryLocked = "DATA_DIRECTORY_LOCKED"
    case shuttingDown = "SHUTTING_DOWN"
    // others
    case storageFull = "STORAGE_FULL"
    case subscriberTooSlow = "SUBSCRIBER_TOO_SLOW"
    case signInRateLimited = "SIGN_IN_RATE_LIMITED"
    case corrupt = "CORRUPT"
    case cancelled = "CANCELLED"
    case readOnly = "READ_ONLY"
    case `internal` = "INTERNAL"
    case unknown = "UNKNOWN"
}
