import Foundation

/// What the change feed needs to know about retention (issue 17, docs/storage.md "History
/// retention", "Tombstone index"): where history and the tombstone index start, the deletions
/// after a position, and when a position is expected to fall out of the history.
extension Store {
    /// The store's retention positions, read together.
    public struct RetentionStatus: Sendable, Equatable {
        /// The oldest position history can be read after (`history(after:)` from it reads all
        /// retained history).
        public var oldestRetained: GenerationToken
        /// The current generation.
        public var current: GenerationToken
        /// The oldest position the tombstone index holds every later deletion for.
        public var deletionsFrom: GenerationToken
    }

    public var retentionStatus: RetentionStatus {
        state.withLock { s in
            RetentionStatus(oldestRetained: GenerationToken(storeID: id, epoch: s.epoch, generation: s.historyHorizon),
                            current: GenerationToken(storeID: id, epoch: s.epoch, generation: s.generation),
                            deletionsFrom: GenerationToken(storeID: id, epoch: s.epoch, generation: s.tombstoneHorizon))
        }
    }

    /// Whether `deletions(after: token)` can answer: the token is this store's, of its epoch,
    /// not from the future, and no deletion after it was trimmed from the index.
    public func deletionsCover(_ token: GenerationToken) -> Bool {
        state.withLock { s in token.storeID == id && token.epoch == s.epoch && token.generation <= s.generation && token.generation >= s.tombstoneHorizon }
    }

    /// `.historyExpired` for a position at generation `g`, with what the client can do instead.
    func historyExpired(after g: Int64, _ s: StoreState, _ what: String) -> StorageError {
        let expiry = HistoryExpiry(oldestRetained: GenerationToken(storeID: id, epoch: s.epoch, generation: s.historyHorizon),
                                   current: GenerationToken(storeID: id, epoch: s.epoch, generation: s.generation),
                                   deletionsAvailable: g >= s.tombstoneHorizon && g <= s.generation)
        return .historyExpired(expiry, what)
    }

    /// The objects deleted after `token` (exclusive; after `afterPK` within `token`'s own
    /// generation when a previous page ended inside it), oldest first, at most `limit`, from the
    /// tombstone index; `entities` (each with its sub-entities) filters them. Throws
    /// `.historyExpired` (with `HistoryExpiry`, `deletionsAvailable` false) when the index no
    /// longer covers the token.
    public func deletions(after token: GenerationToken, afterPK: Int64 = .max, entities: [String] = [], limit: Int = 1000) async throws -> DeletionsPage {
        let (current, epoch, model) = try state.withLock { s -> (Int64, UInt64, ResolvedModel) in
            guard token.storeID == id else { throw StorageError(.tokenOfAnotherStore(token.storeID), "the token belongs to another store") }
            guard token.epoch == s.epoch else { throw StorageError(.storeReplaced, "store was replaced since this token was issued") }
            guard let m = s.model else { throw StorageError.noModelYet }
            guard token.generation <= s.generation else { throw StorageError(.invalidArgument, "token names a generation this store has not reached") }
            guard token.generation >= s.tombstoneHorizon else {
                throw historyExpired(after: token.generation, s, "deletions through generation \(s.tombstoneHorizon) were trimmed from the tombstone index")
            }
            return (s.generation, s.epoch, m)
        }
        var family = Set<String>()
        for e in entities {
            guard let f = model.family[e] else { throw StorageError(.validationFailed([ValidationIssue(.unknownEntity, entity: e, "no such entity")]), "unknown entity \(e)") }
            family.formUnion(f)
        }
        let names = family.sorted()
        let n = max(1, limit)
        let sid = id
        let rows = try await onReader(use: .fresh) { conn in
            var out: [DeletedObject] = []
            let filter = names.isEmpty ? "" : " AND entity IN (\(names.indices.map { "?\($0 + 5)" }.joined(separator: ", ")))"
            try conn.query("SELECT generation, pk, entity FROM ubq_tombstones WHERE (generation, pk) > (?1, ?2) AND generation <= ?3\(filter) ORDER BY generation, pk LIMIT ?4",
                           [.integer(token.generation), .integer(afterPK), .integer(current), .integer(Int64(n + 1))] + names.map { .text($0) }) { st in
                out.append(DeletedObject(objectID: ObjectID(storeID: sid, entity: st.text(2), pk: st.int(1)), generation: st.int(0)))
            }
            return out
        }
        // GC raises the horizon before its trim commits: unmoved now, the read saw every row.
        try state.withLock { s in
            if token.generation < s.tombstoneHorizon {
                throw historyExpired(after: token.generation, s, "deletions through generation \(s.tombstoneHorizon) were trimmed from the tombstone index")
            }
        }
        let currentToken = GenerationToken(storeID: sid, epoch: epoch, generation: current)
        guard rows.count > n else {
            return DeletionsPage(deletions: rows, nextToken: currentToken, nextAfterPK: .max, hasMore: false, current: currentToken)
        }
        let page = Array(rows.prefix(n))
        let last = page[page.count - 1]
        return DeletionsPage(deletions: page, nextToken: GenerationToken(storeID: sid, epoch: epoch, generation: last.generation), nextAfterPK: last.objectID.pk,
                             hasMore: true, current: currentToken)
    }

    /// When, at the current retention settings and commit rate, history is expected to lose the
    /// first transaction after `token` (the position then fails with `.historyExpired`): the
    /// earliest of the generation, age and size rules' estimates. The commit rate is the last
    /// minute's (`ReadableWindow`); nil when no rule would trim it at that rate (no limits, or no
    /// commits). A position already expired gets now.
    public func historyExpiryEstimate(after token: GenerationToken) async throws -> Date? {
        let clockNow = config.clock()
        let (g, current, horizon, rate) = try state.withLock { s -> (Int64, Int64, Int64, Double?) in
            guard token.storeID == id else { throw StorageError(.tokenOfAnotherStore(token.storeID), "the token belongs to another store") }
            guard token.epoch == s.epoch else { throw StorageError(.storeReplaced, "store was replaced since this token was issued") }
            return (token.generation, s.generation, s.historyHorizon, s.window.commitRate(current: s.generation, now: clockNow))
        }
        let now = config.wallClock()
        if g < horizon { return Date(timeIntervalSince1970: now) }
        var estimates: [Double] = []
        if let keep = config.historyRetentionGenerations {
            let commitsLeft = Double(g + 1 + keep - current)
            if commitsLeft <= 0 { estimates.append(now) } else if let r = rate { estimates.append(now + commitsLeft / r) }
        }
        let (maxAge, maxBytes) = (config.historyRetentionSeconds, config.historyRetentionBytes)
        if maxAge != nil || maxBytes != nil {
            let (firstAfter, size) = try await onReader(use: .fresh) { conn -> (Int64?, (bytes: Int64, through: Int64)?) in
                let ts = try conn.scalar("SELECT timestamp FROM ubq_history WHERE generation > ? ORDER BY generation LIMIT 1", [.integer(g)])
                if case .integer(let ms) = ts { return (ms, try HistorySize.lastKnown(conn)) }
                return (nil, try HistorySize.lastKnown(conn))
            }
            if let maxAge {
                // the first transaction after the position, or the next one to commit
                estimates.append((firstAfter.map { Double($0) / 1000 } ?? now) + maxAge)
            }
            if let maxBytes, let size, size.through > horizon {
                let perCommit = Double(size.bytes) / Double(size.through - horizon)
                let bytesLeft = Double(maxBytes) - Double(current - g) * perCommit
                if bytesLeft <= 0 { estimates.append(now) } else if let r = rate, perCommit > 0 { estimates.append(now + bytesLeft / (r * perCommit)) }
            }
        }
        return estimates.min().map { Date(timeIntervalSince1970: $0) }
    }
}
