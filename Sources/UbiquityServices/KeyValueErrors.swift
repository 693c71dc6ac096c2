import UbiquityProtos
import UbiquityStorage

/// The key-value service's own errors, with their details (docs/errors.md).
enum KeyValueErrors {
    /// RESOURCE_EXHAUSTED KEY_VALUE_QUOTA with `KeyValueQuotaDetails`.
    static func quota(_ v: KeyValueQuotas.Violation, field: String) -> ServiceError {
        var d = Ubiquity_V1_KeyValueQuotaDetails()
        d.limit = v.limit
        d.requested = v.requested
        d.used = v.used
        let what: String
        switch v.quota {
        case .keys:
            d.quota = .keys
            what = "the account has \(v.used) keys and may have at most \(v.limit) (--kv-max-keys): delete keys first"
        case .accountBytes:
            d.quota = .accountBytes
            what = "the account's keys and values would take \(v.requested) bytes, over its quota of \(v.limit) (--kv-max-account-bytes; \(v.used) used): delete or shrink values first"
        case .keyBytes:
            d.quota = .keyBytes
            what = "\(field): the key is \(v.requested) bytes of UTF-8, more than the \(v.limit) a key may have (--kv-max-key-bytes)"
        case .valueBytes:
            d.quota = .valueBytes
            what = "\(field): the value is \(v.requested) bytes, more than the \(v.limit) a value may have (--kv-max-value-bytes)"
        }
        var e = ServiceError.exhausted(what, reason: .keyValueQuota)
        e.metadata = ["field": field]
        e.details = [d]
        return e
    }

    /// UNAUTHENTICATED SESSION_REVOKED for a write of a local session whose entries a first
    /// sign-in moved into an account while the write was under way (its session was revoked
    /// then): nothing was written, and it goes to the account once the device writes again with
    /// the session SignIn returned (docs/keyvalue.md "First sign-in").
    static func movedAway() -> ServiceError {
        Authenticator.unauthenticated(reason: .sessionRevoked,
                                      "this device signed in and its local key-value entries moved into the account while the write ran; nothing was written: write again with the session Accounts.SignIn returned")
    }

    /// ABORTED KEY_VERSION_CONFLICT with `KeyValueConflictDetails`.
    static func conflict(key: String, exists: Bool, version: Int64, expected: KeyValueStore.Condition) -> ServiceError {
        var d = Ubiquity_V1_KeyValueConflictDetails()
        d.key = key
        d.exists = exists
        d.currentVersion = version
        let wanted: String
        switch expected {
        case .version(let v): wanted = "version \(v)"
        case .mustNotExist: wanted = "the key not to exist"
        case .none: wanted = "nothing"
        }
        let found = exists ? "it is at version \(version)" : "it is not set"
        var e = ServiceError(code: .aborted, reason: .keyVersionConflict,
                             message: "key \"\(key.prefix(100))\": the write expected \(wanted) but \(found); nothing changed: read the key again (KeyValueConflictDetails has its version) and retry")
        e.details = [d]
        return e
    }
}
