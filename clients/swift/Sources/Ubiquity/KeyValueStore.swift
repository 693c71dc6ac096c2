import Foundation
import GRPCCore
import SwiftProtobuf

/// The account's key-value store (`KeyValue`, docs/keyvalue.md in the repository): small opaque
/// values by key, each with a version for compare-and-set — what iCloud keeps in
/// NSUbiquitousKeyValueStore. `client.keyValues`.
///
/// ```swift
/// let kv = client.keyValues
/// let v = try await kv.set("seeded", Data("yes".utf8))            // version 1
/// try await kv.set("seeded", Data("again".utf8), if: .version(v))  // or .keyVersionConflict
/// ```
public struct KeyValueStore: Sendable {
    let client: UbiquityClient

    /// One key's value, version and last writer.
    public struct Entry: Sendable, Hashable {
        public var key: String
        /// Empty in a `keysOnly` list.
        public var value: Data
        /// 1 when first set, one more with every write of the key.
        public var version: Int64
        public var updateTime: Date
        /// The `author` of the last write.
        public var author: String
        public var valueSize: Int64

        init(proto e: Ubiquity_V1_KeyValueEntry) {
            key = e.key
            value = e.value
            version = e.version
            updateTime = e.updateTime.date
            author = e.author
            valueSize = e.valueSize
        }
    }

    /// What a write's precondition asks of the key's current state.
    public enum Condition: Sendable, Hashable {
        /// Write whatever the key's state.
        case always
        /// The key exists at exactly this version.
        case version(Int64)
        /// The key is not set (create only).
        case absent

        var proto: Ubiquity_V1_KeyValuePrecondition? {
            switch self {
            case .always: nil
            case .version(let v): .with { $0.expectedVersion = v }
            case .absent: .with { $0.mustNotExist = true }
            }
        }
    }

    /// The key's entry, or nil when it is not set.
    public func get(_ key: String) async throws -> Entry? {
        do {
            return Entry(proto: try await client.unary { md, opts in
                try await client.keyValue.get(.with { $0.key = key }, metadata: md, options: opts)
            })
        } catch let e as UbiquityError where e.reason == "KEY_NOT_FOUND" {
            return nil
        }
    }

    /// Sets `key` to `value` if `condition` holds (else `.keyVersionConflict`, with
    /// `keyValueConflict` saying the key's current version); returns the key's new version.
    @discardableResult
    public func set(_ key: String, _ value: Data, if condition: Condition = .always, author: String = "") async throws -> Int64 {
        try await client.unary { md, opts in
            try await client.keyValue.set(
                .with {
                    $0.key = key
                    $0.value = value
                    if let p = condition.proto { $0.precondition = p }
                    $0.author = author
                }, metadata: md, options: opts)
        }.version
    }

    /// Deletes `key` if `condition` holds; returns whether it existed.
    @discardableResult
    public func delete(_ key: String, if condition: Condition = .always, author: String = "") async throws -> Bool {
        try await client.unary { md, opts in
            try await client.keyValue.delete(
                .with {
                    $0.key = key
                    if let p = condition.proto { $0.precondition = p }
                    $0.author = author
                }, metadata: md, options: opts)
        }.existed
    }

    /// Every entry whose key starts with `prefix`, in key order, reading page after page.
    public func list(prefix: String = "", keysOnly: Bool = false, pageSize: UInt32 = 0) async throws -> [Entry] {
        var entries: [Entry] = []
        var page = Data()
        repeat {
            let response = try await client.unary { [page] md, opts in
                try await client.keyValue.list(
                    .with {
                        $0.prefix = prefix
                        $0.keysOnly = keysOnly
                        $0.pageSize = pageSize
                        $0.pageToken = page
                    }, metadata: md, options: opts)
            }
            entries += response.entries.map(Entry.init(proto:))
            page = response.nextPageToken
        } while !page.isEmpty
        return entries
    }
}

extension UbiquityClient {
    /// The account's key-value store.
    public var keyValues: KeyValueStore { KeyValueStore(client: self) }
}
