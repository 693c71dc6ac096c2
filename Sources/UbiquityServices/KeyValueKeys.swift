import UbiquityStorage

/// What a key-value key may be (docs/keyvalue.md "Keys"). Keys are names chosen by apps, shown in
/// tools and logs, and compared byte for byte; the rules keep them printable and flat.
enum KeyValueKeys {
    /// Why a key is refused (nil: it is fine). The length rule is a quota
    /// (`KeyValueQuotas.checkKey`, RESOURCE_EXHAUSTED), checked separately.
    static func problem(_ key: String) -> String? {
        if key.isEmpty { return "a key is required (1 or more characters)" }
        for (i, u) in key.unicodeScalars.enumerated() {
            // C0, DEL and C1 controls: invisible in tools and logs, and a NUL ends C strings.
            if u.value < 0x20 || (0x7F...0x9F).contains(u.value) {
                return "control character U+\(hex(u.value)) at character \(i): keys are printable names"
            }
            // Keys are flat names, not paths: a `/` or `\` would suggest a hierarchy the store does not
            // have, and refusing them keeps every key usable as one path segment or file name by
            // clients that map keys to files. Use `.` to namespace (`settings.theme`) and List by prefix.
            if u == "/" || u == "\\" {
                return "path separator \"\(u)\" at character \(i): keys are flat names; namespace with \".\" instead (e.g. \"settings.theme\")"
            }
        }
        return nil
    }

    private static func hex(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    /// Checks `key` (request field `field`): INVALID_ARGUMENT BAD_KEY for a malformed key,
    /// RESOURCE_EXHAUSTED KEY_VALUE_QUOTA for one longer than the key quota.
    static func check(_ key: String, field: String = "key", quotas: KeyValueQuotas) throws {
        if let p = problem(key) { throw ServiceError.invalid(field, p, reason: .badKey) }
        if let v = quotas.checkKey(bytes: key.utf8.count) { throw KeyValueErrors.quota(v, field: field) }
    }

    /// Checks List's `prefix`: empty lists every key; one with a character no key may hold would
    /// list nothing, silently — refused with BAD_KEY instead, so "settings/" is told to be
    /// "settings." rather than answered with an empty page.
    static func checkPrefix(_ prefix: String) throws {
        if !prefix.isEmpty, let p = problem(prefix) {
            throw ServiceError.invalid("prefix", "no key can start with this prefix: " + p, reason: .badKey)
        }
    }
}

/// A 64-bit FNV-1a hash: ties a token to the account (and prefix) it was made for, so a token
/// passed to the wrong account or prefix is refused instead of silently meaning something else.
/// Not a secret: every read is scoped to the caller's account whatever a token says.
func fnv64(_ parts: [String]) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for p in parts {
        for b in p.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        h = (h ^ 0xff) &* 0x100_0000_01b3  // separator: ["ab", "c"] and ["a", "bc"] differ
    }
    return h
}

/// The key-value feed's resume token: a position (the account's change sequence number) in one
/// account's key-value changes. 18 bytes: "K", format 1, the account's tag, the position, both
/// big-endian. A store's generation token (33 bytes) is never mistaken for one.
struct KeyValueFeedToken: Equatable {
    let accountTag: UInt64
    let seq: Int64

    static let length = 18

    init(account: String, seq: Int64) { self.init(tag: fnv64(["kv-feed", account]), seq: seq) }
    private init(tag: UInt64, seq: Int64) { accountTag = tag; self.seq = seq }

    var bytes: [UInt8] {
        var b: [UInt8] = [0x4B, 1]
        appendBigEndian(&b, accountTag)
        appendBigEndian(&b, UInt64(bitPattern: seq))
        return b
    }

    /// The token in `bytes` if it is one of `account`'s (nil: malformed, or another account's).
    static func parse(_ bytes: [UInt8], account: String) -> KeyValueFeedToken? {
        guard bytes.count == length, bytes[0] == 0x4B, bytes[1] == 1 else { return nil }
        let t = KeyValueFeedToken(tag: readBigEndian(bytes, at: 2), seq: Int64(bitPattern: readBigEndian(bytes, at: 10)))
        guard t.seq >= 0, t == KeyValueFeedToken(account: account, seq: t.seq) else { return nil }
        return t
    }
}

/// List's page token: where the next page starts (after the last key sent), tied to the account
/// and prefix it was made for. "L", format 1, the tag (8 bytes, big-endian), the last key's UTF-8.
struct KeyValuePageToken: Equatable {
    let afterKey: String

    static func tag(account: String, prefix: String) -> UInt64 { fnv64(["kv-list", account, prefix]) }

    func bytes(account: String, prefix: String) -> [UInt8] {
        var b: [UInt8] = [0x4C, 1]
        appendBigEndian(&b, Self.tag(account: account, prefix: prefix))
        return b + Array(afterKey.utf8)
    }

    /// The token in `bytes` if it is one this account made for this prefix.
    static func parse(_ bytes: [UInt8], account: String, prefix: String) -> KeyValuePageToken? {
        guard bytes.count > 10, bytes[0] == 0x4C, bytes[1] == 1, readBigEndian(bytes, at: 2) == tag(account: account, prefix: prefix),
              let key = String(validating: bytes[10...], as: UTF8.self), key.utf8.starts(with: prefix.utf8) else { return nil }
        return KeyValuePageToken(afterKey: key)
    }
}

private func appendBigEndian(_ b: inout [UInt8], _ v: UInt64) {
    for shift in stride(from: 56, through: 0, by: -8) { b.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
}

private func readBigEndian(_ b: [UInt8], at i: Int) -> UInt64 {
    var v: UInt64 = 0
    for k in 0..<8 { v = v << 8 | UInt64(b[i + k]) }
    return v
}
