import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

/// `ubiquity.v1.KeyValue`: the account's small key-value store (docs/keyvalue.md). Every method
/// is a short SQLite read or write, run on a blocking worker thread; each write wakes the
/// account's key-value subscribers once it is committed.
public struct KeyValueService: Sendable {
    let backend: Backend
    public init(backend: Backend) { self.backend = backend }

    /// List's default and largest page.
    static let defaultPageSize = 100, maxPageSize = 1000

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.KeyValue", backend: backend) { t in
            t.blocking("Get", get)
            t.blocking("Set", set)
            t.blocking("Delete", delete)
            t.blocking("List", list)
        }
    }

    private var store: KeyValueStore { backend.keyValues }

    func get(_ req: Ubiquity_V1_KeyValueGetRequest, context: ServerContext) throws -> Ubiquity_V1_KeyValueEntry {
        try KeyValueKeys.check(req.key, quotas: store.quotas)
        guard let e = try store.get(account: context.account.id, key: req.key) else { throw Self.notFound(req.key) }
        return Self.entry(e, withValue: true)
    }

    func set(_ req: Ubiquity_V1_KeyValueSetRequest, context: ServerContext) throws -> Ubiquity_V1_KeyValueWriteResponse {
        TestSequence.reach("kv.set.authorized")
        try KeyValueKeys.check(req.key, quotas: store.quotas)
        let condition = try Self.condition(req.hasPrecondition ? req.precondition : nil)
        TestSequence.reach("kv.set.write")
        let outcome = try store.set(account: context.account.id, key: req.key, value: Array(req.value), condition: condition, author: req.author)
        return try respond(outcome, key: req.key, author: req.author, condition: condition, account: context.account)
    }

    func delete(_ req: Ubiquity_V1_KeyValueDeleteRequest, context: ServerContext) throws -> Ubiquity_V1_KeyValueWriteResponse {
        try KeyValueKeys.check(req.key, quotas: store.quotas)
        let condition = try Self.condition(req.hasPrecondition ? req.precondition : nil)
        if condition == .mustNotExist {
            throw ServiceError.invalid("precondition.must_not_exist", "a delete that requires the key not to exist would do nothing: use expected_version, or no precondition", reason: .invalidArgument)
        }
        let outcome = try store.delete(account: context.account.id, key: req.key, condition: condition, author: req.author)
        return try respond(outcome, key: req.key, author: req.author, condition: condition, account: context.account)
    }

    func list(_ req: Ubiquity_V1_KeyValueListRequest, context: ServerContext) throws -> Ubiquity_V1_KeyValueListResponse {
        guard req.pageSize <= Self.maxPageSize else {
            throw ServiceError.invalid("page_size", "at most \(Self.maxPageSize)", reason: .limitExceeded)
        }
        try KeyValueKeys.checkPrefix(req.prefix)
        let account = context.account.id
        var after: String?
        if !req.pageToken.isEmpty {
            guard let t = KeyValuePageToken.parse(Array(req.pageToken), account: account, prefix: req.prefix) else {
                throw ServiceError.invalid("page_token", "not a page token of this List (a token is tied to its prefix): pass back next_page_token unchanged with the same prefix", reason: .badToken)
            }
            after = t.afterKey
        }
        let limit = req.pageSize == 0 ? Self.defaultPageSize : Int(req.pageSize)
        let page = try store.list(account: account, prefix: req.prefix, afterKey: after, limit: limit)
        var res = Ubiquity_V1_KeyValueListResponse()
        res.entries = page.entries.map { Self.entry($0, withValue: !req.keysOnly) }
        if page.hasMore, let last = page.entries.last {
            res.nextPageToken = Data(KeyValuePageToken(afterKey: last.key).bytes(account: account, prefix: req.prefix))
        }
        res.feedToken = Data(KeyValueFeedToken(account: account, seq: page.seq).bytes)
        let q = store.quotas
        res.usage.keys = page.usage.keys
        res.usage.bytes = page.usage.bytes
        res.usage.maxKeys = q.maxKeys
        res.usage.maxBytes = q.maxAccountBytes
        res.usage.maxKeyBytes = q.maxKeyBytes
        res.usage.maxValueBytes = q.maxValueBytes
        return res
    }

    /// A write's response, or its refusal as an error; a committed write wakes the subscribers.
    private func respond(_ outcome: KeyValueStore.WriteOutcome, key: String, author: String, condition: KeyValueStore.Condition,
                         account: Account) throws -> Ubiquity_V1_KeyValueWriteResponse {
        var res = Ubiquity_V1_KeyValueWriteResponse()
        switch outcome {
        case .written(let e):
            backend.keyValueFeed.committed(account: account.id, seq: e.seq)
            res.version = e.version
            res.feedToken = Data(KeyValueFeedToken(account: account.id, seq: e.seq).bytes)
            res.existed = e.deleted
        case .absent(let version, let seq):
            res.version = version
            res.feedToken = Data(KeyValueFeedToken(account: account.id, seq: seq).bytes)
        case .conflict(let exists, let version):
            throw KeyValueErrors.conflict(key: key, exists: exists, version: version, expected: condition)
        case .quota(let v):
            // the account is full: its other devices hear it (QUOTA_VIOLATION), as they would from
            // NSUbiquitousKeyValueStore; a key or value too long for any account is only the
            // writer's business
            if v.quota == .keys || v.quota == .accountBytes {
                backend.keyValueFeed.quotaViolation(account: account.id, key: key, author: author)
            }
            throw KeyValueErrors.quota(v, field: v.quota == .valueBytes ? "value" : "key")
        case .movedAway:
            throw KeyValueErrors.movedAway()
        }
        return res
    }

    static func condition(_ p: Ubiquity_V1_KeyValuePrecondition?) throws -> KeyValueStore.Condition {
        switch p?.condition {
        case nil: return .none
        case .expectedVersion(let v)?:
            guard v > 0 else { throw ServiceError.invalid("precondition.expected_version", "versions start at 1: use must_not_exist to require that the key is not set", reason: .invalidArgument) }
            return .version(v)
        case .mustNotExist(let b)?:
            guard b else { throw ServiceError.invalid("precondition.must_not_exist", "set it to true, or leave the precondition unset", reason: .invalidArgument) }
            return .mustNotExist
        }
    }

    static func notFound(_ key: String) -> ServiceError {
        ServiceError.notFound("key \"\(key.prefix(100))\" is not set in this account", reason: .keyNotFound)
    }

    static func entry(_ e: KeyValueStore.Entry, withValue: Bool) -> Ubiquity_V1_KeyValueEntry {
        var r = Ubiquity_V1_KeyValueEntry()
        r.key = e.key
        if withValue { r.value = Data(e.value) }
        r.version = e.version
        r.valueSize = Int64(e.value.count)
        r.author = e.author
        r.updateTime = Google_Protobuf_Timestamp(seconds: e.updatedMS / 1000, nanos: Int32(e.updatedMS % 1000) * 1_000_000)
        return r
    }
}
