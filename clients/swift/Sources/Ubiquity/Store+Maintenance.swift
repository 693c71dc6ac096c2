import Foundation
import GRPCCore

/// Whole-store operations: seeding once (`Stores.Seed`), merging duplicates
/// (`Stores.Deduplicate`) and replacing a store's contents with another's (`Stores.ReplaceStore`).
extension Store {
    /// What `seed` did.
    public struct SeedResult: Sendable {
        /// The generation that holds the seed.
        public var token: GenerationToken?
        /// True when this call applied it; false when it had been applied before.
        public var applied: Bool
        /// Temporary ID → permanent ID, as first applied.
        public var permanentIDs: [String: String]
    }

    /// Inserts `inserts` once per store, ever, under `seedID` (SPEC §4.2): a second call with the
    /// same ID applies nothing and returns the first call's IDs. So, unlike a batch, a seed whose
    /// outcome is unknown is safe to send again, and it is (as a save is).
    @discardableResult
    public func seed(_ seedID: String, _ inserts: [Insert], author: String = "") async throws -> SeedResult {
        let storeID = id
        let (proto, _) = try await client.save(clientTransactionID: seedID, modelVersion: expectedModelVersion) { [client] _, md, opts in
            try await client.stores.seed(
                .with {
                    $0.storeID = storeID
                    $0.seedID = seedID
                    $0.inserts = inserts.map(\.proto)
                    $0.author = author
                }, metadata: md, options: opts)
        }
        return SeedResult(token: GenerationToken(ifPresent: proto.token), applied: proto.applied, permanentIDs: proto.permanentIds)
    }

    /// What `deduplicate` did.
    public struct DeduplicateResult: Sendable {
        /// The generation after the last batch.
        public var token: GenerationToken?
        /// How many groups had duplicates.
        public var groups: Int64
        /// How many objects were removed.
        public var removed: Int64
        /// Each group: the object kept and the objects deleted.
        public var details: [(winner: String, removed: [String])]
    }

    /// Merges the objects of `entity` whose `uniqueKey` attributes are equal into one per group
    /// (the server's choice of winner, docs/stores.md), deleting the others `batchSize` per
    /// transaction (0: the server's default).
    @discardableResult
    public func deduplicate(
        _ entity: String, uniqueKey: [String], batchSize: Int32 = 0, author: String = ""
    ) async throws -> DeduplicateResult {
        let proto = try await client.unary(modelVersion: expectedModelVersion) { md, opts in
            try await client.stores.deduplicate(
                .with {
                    $0.storeID = id
                    $0.entity = entity
                    $0.uniqueKey = uniqueKey
                    $0.batchSize = batchSize
                    $0.author = author
                }, metadata: md, options: opts)
        }
        return DeduplicateResult(
            token: GenerationToken(ifPresent: proto.token), groups: proto.groups, removed: proto.removed,
            details: proto.details.map { ($0.winnerObjectID, $0.removedObjectIds) })
    }

    /// Replaces this store's contents with `source`'s (same account; `source` is left as it
    /// is). This store keeps its ID and name and starts a new epoch: its feeds end with
    /// STORE_REPLACED and reads at older tokens fail `.generationExpired`. Returns the new
    /// current token.
    @discardableResult
    public func replace(with source: Store) async throws -> GenerationToken {
        GenerationToken(try await client.unary { md, opts in
            try await client.stores.replaceStore(
                .with {
                    $0.storeID = id
                    $0.sourceStoreID = source.id
                }, metadata: md, options: opts)
        }.token)
    }
}
