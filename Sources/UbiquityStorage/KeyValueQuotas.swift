/// The quotas of one account's key-value store (docs/keyvalue.md "Quotas"; ubiquityd's `--kv-*`
/// flags). The defaults follow NSUbiquitousKeyValueStore's order of magnitude (1,024 keys, 1 MB):
/// the store is for preferences and flags, not documents.
public struct KeyValueQuotas: Sendable, Equatable {
    /// Keys set at once per account.
    public var maxKeys: Int64 = 1024
    /// UTF-8 bytes of one key.
    public var maxKeyBytes: Int64 = 128
    /// Bytes of one value.
    public var maxValueBytes: Int64 = 64 * 1024
    /// Bytes per account: every set key's UTF-8 plus its value.
    public var maxAccountBytes: Int64 = 1 << 20
    public init() {}

    /// Which quota a write would exceed.
    public enum Quota: Sendable, Equatable { case keys, accountBytes, keyBytes, valueBytes }

    /// A refused write: the quota, its limit, what the write asked for and what is used now.
    public struct Violation: Sendable, Equatable {
        public var quota: Quota
        public var limit: Int64
        public var requested: Int64
        public var used: Int64
    }

    /// A key longer than any key may be (every RPC refuses it before it reaches the store).
    public func checkKey(bytes: Int) -> Violation? {
        bytes > maxKeyBytes ? Violation(quota: .keyBytes, limit: maxKeyBytes, requested: Int64(bytes), used: 0) : nil
    }

    /// Whether setting a key of `keyBytes` to a value of `valueBytes` fits, given the account's
    /// `usage` and the key's current value size (`oldValueBytes`, nil if the key is not set).
    /// A write that does not grow what is counted always fits, so an account left over a lowered
    /// quota can still shrink or delete its values.
    public func check(usage: KeyValueUsage, keyBytes: Int, oldValueBytes: Int?, valueBytes: Int) -> Violation? {
        if let v = checkKey(bytes: keyBytes) { return v }
        if Int64(valueBytes) > maxValueBytes {
            return Violation(quota: .valueBytes, limit: maxValueBytes, requested: Int64(valueBytes), used: 0)
        }
        return check(from: usage, to: usage.setting(keyBytes: keyBytes, oldValueBytes: oldValueBytes, valueBytes: valueBytes))
    }

    /// Whether a change of the account's usage from `before` to `after` fits the per-account
    /// quotas: what it grows must stay within them.
    public func check(from before: KeyValueUsage, to after: KeyValueUsage) -> Violation? {
        if after.keys > before.keys && after.keys > maxKeys {
            return Violation(quota: .keys, limit: maxKeys, requested: after.keys, used: before.keys)
        }
        if after.bytes > before.bytes && after.bytes > maxAccountBytes {
            return Violation(quota: .accountBytes, limit: maxAccountBytes, requested: after.bytes, used: before.bytes)
        }
        return nil
    }

    /// The per-account quota `usage` is over, if any (a quota lowered since the values were
    /// written, or a first-sign-in import that raced other writes: `KeyValueStore.moveLocalEntries`).
    public func excess(_ usage: KeyValueUsage) -> Violation? {
        if usage.keys > maxKeys { return Violation(quota: .keys, limit: maxKeys, requested: usage.keys, used: usage.keys) }
        if usage.bytes > maxAccountBytes {
            return Violation(quota: .accountBytes, limit: maxAccountBytes, requested: usage.bytes, used: usage.bytes)
        }
        return nil
    }
}

/// What an account's key-value store holds, as the quotas count it.
public struct KeyValueUsage: Sendable, Equatable {
    /// Keys set (deleted keys' tombstones are not counted).
    public var keys: Int64
    /// Every set key's UTF-8 bytes plus its value's bytes.
    public var bytes: Int64
    public init(keys: Int64 = 0, bytes: Int64 = 0) { self.keys = keys; self.bytes = bytes }

    /// The usage after setting a key (`oldValueBytes` nil: the key is new).
    public func setting(keyBytes: Int, oldValueBytes: Int?, valueBytes: Int) -> KeyValueUsage {
        var u = self
        if let old = oldValueBytes { u.bytes -= Int64(keyBytes + old) } else { u.keys += 1 }
        u.bytes += Int64(keyBytes + valueBytes)
        return u
    }

    /// The usage after deleting a set key.
    public func deleting(keyBytes: Int, valueBytes: Int) -> KeyValueUsage {
        KeyValueUsage(keys: keys - 1, bytes: bytes - Int64(keyBytes + valueBytes))
    }
}
