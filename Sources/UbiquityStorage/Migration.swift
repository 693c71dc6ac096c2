import Foundation

/// What a lightweight migration did (or, for a dry run, would do).
public struct MigrationReport: Codable, Sendable {
    public var fromHash: String?
    public var toHash: String
    /// Human-readable steps, in order.
    public var steps: [String]
    public var dryRun: Bool
    /// The backup of the store taken before applying (nil for dry runs or no-ops).
    public var backupPath: String?
    /// The generation after the migration (older tokens expire: row history is collapsed).
    public var token: GenerationToken?
}

/// Infers a lightweight migration between two models (§4.7) and applies it by rebuilding the
/// store's tables inside one transaction. Runs on the writer thread.
struct MigrationPlanner {
    let old: ResolvedModel
    let new: ResolvedModel

    /// new entity → old entity (same name or renaming identifier)
    var entityMap: [String: String] {
        var m: [String: String] = [:]
        for e in new.definition.entities {
            if let r = e.renamingIdentifier, old.entities[r] != nil { m[e.name] = r }
            else if old.entities[e.name] != nil { m[e.name] = e.name }
        }
        return m
    }

    func oldAttribute(_ newEntity: String, _ a: AttributeDefinition) -> AttributeDefinition? {
        guard let oe = entityMap[newEntity], let attrs = old.attributes[oe] else { return nil }
        if let r = a.renamingIdentifier, let x = attrs[r] { return x }
        return attrs[a.name]
    }

    func oldRelationship(_ newEntity: String, _ r: RelationshipDefinition) -> RelationshipDefinition? {
        guard let oe = entityMap[newEntity], let rels = old.relationships[oe] else { return nil }
        if let n = r.renamingIdentifier, let x = rels[n] { return x }
        return rels[r.name]
    }

    /// Reasons the change is not inferable (empty: inferable) and the steps it takes.
    func plan(liveCount: (String) throws -> Int, nullCount: (String, String) throws -> Int) throws -> (reasons: [String], steps: [String]) {
        var reasons: [String] = [], steps: [String] = []
        let emap = entityMap
        let mapped = Set(emap.values)
        for e in new.definition.entities {
            guard let oe = emap[e.name] else { steps.append("add entity \(e.name)"); continue }
            if oe != e.name { steps.append("rename entity \(oe) → \(e.name)") }
            let oldParent = old.entities[oe]!.parent
            let newParentMapped = e.parent.flatMap { emap[$0] }
            if oldParent != newParentMapped && !(oldParent == nil && e.parent == nil) {
                reasons.append("\(e.name): changing the parent entity (\(oldParent ?? "none") → \(e.parent ?? "none")) is not a lightweight migration")
            }
            for a in e.attributes {
                guard let oa = oldAttribute(e.name, a) else {
                    if !a.optional && (a.defaultValue ?? .null).isNull {
                        if try liveCount(oe) > 0 { reasons.append("\(e.name).\(a.name): a new required attribute needs a default value (the store holds \(oe) objects)") }
                    }
                    steps.append("add attribute \(e.name).\(a.name)"); continue
                }
                if oa.name != a.name { steps.append("rename attribute \(e.name).\(oa.name) → \(a.name)") }
                if oa.type != a.type { reasons.append("\(e.name).\(a.name): changing the type \(oa.type.rawValue) → \(a.type.rawValue) is not a lightweight migration") }
                if oa.optional && !a.optional {
                    if (a.defaultValue ?? .null).isNull {
                        if try nullCount(oe, oa.name) > 0 { reasons.append("\(e.name).\(a.name): making it required needs a default value (some objects have none)") }
                    } else { steps.append("make \(e.name).\(a.name) required, filling missing values with the default") }
                } else if !oa.optional && a.optional { steps.append("make \(e.name).\(a.name) optional") }
            }
            for oa in old.entities[oe]!.attributes where !e.attributes.contains(where: { oldAttribute(e.name, $0)?.name == oa.name }) {
                steps.append("remove attribute \(e.name).\(oa.name)")
            }
            for r in e.relationships {
                guard let orl = oldRelationship(e.name, r) else { steps.append("add relationship \(e.name).\(r.name)"); continue }
                if orl.name != r.name { steps.append("rename relationship \(e.name).\(orl.name) → \(r.name)") }
                let destMapped = emap[r.destination]
                if destMapped != orl.destination { reasons.append("\(e.name).\(r.name): changing the destination \(orl.destination) → \(r.destination) is not a lightweight migration") }
                if orl.toMany && !r.toMany { reasons.append("\(e.name).\(r.name): to-many → to-one is not a lightweight migration (objects could have several)") }
                if !orl.toMany && r.toMany { steps.append("make \(e.name).\(r.name) to-many") }
                if orl.deleteRule != r.deleteRule { steps.append("delete rule of \(e.name).\(r.name): \(orl.deleteRule.rawValue) → \(r.deleteRule.rawValue)") }
            }
            for orl in old.entities[oe]!.relationships where !e.relationships.contains(where: { oldRelationship(e.name, $0)?.name == orl.name }) {
                steps.append("remove relationship \(e.name).\(orl.name)")
            }
            let oldIdx = Set(old.entities[oe]!.indexes), newIdx = Set(e.indexes)
            for i in newIdx.subtracting(oldIdx) { steps.append("add index \(e.name)(\(i.joined(separator: ", ")))") }
            for i in oldIdx.subtracting(newIdx) { steps.append("remove index \(e.name)(\(i.joined(separator: ", ")))") }
            let oldU = Set(old.entities[oe]!.uniquenessConstraints), newU = Set(e.uniquenessConstraints)
            for u in newU.subtracting(oldU) { steps.append("add uniqueness constraint \(e.name)(\(u.joined(separator: ", ")))") }
            for u in oldU.subtracting(newU) { steps.append("remove uniqueness constraint \(e.name)(\(u.joined(separator: ", ")))") }
        }
        for oe in old.definition.entities where !mapped.contains(oe.name) { steps.append("remove entity \(oe.name) and its objects") }
        return (reasons, steps)
    }
}

extension WriterEngine {
    func migrate(_ conn: Connection, to new: ResolvedModel, dryRun: Bool, backupPath: String?) throws -> MigrationReport {
        let (oldModel, epoch) = state.withLock { ($0.model, $0.epoch) }
        guard let old = oldModel else {
            // first model: install
            if dryRun { return MigrationReport(fromHash: nil, toHash: new.hash, steps: ["install model"], dryRun: true, backupPath: nil, token: nil) }
            try conn.exec("BEGIN IMMEDIATE")
            do {
                for s in new.createStatements() { try conn.exec(s) }
                try Meta.set(conn, "model_json", .text(String(decoding: try new.definition.jsonData(), as: UTF8.self)))
                try Meta.set(conn, "model_hash", .text(new.hash))
                try conn.exec("COMMIT")
            } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
            state.withLock { $0.model = new }
            return MigrationReport(fromHash: nil, toHash: new.hash, steps: ["install model"], dryRun: false, backupPath: nil, token: nil)
        }
        if old.hash == new.hash && old.definition == new.definition {
            return MigrationReport(fromHash: old.hash, toHash: new.hash, steps: [], dryRun: dryRun, backupPath: nil, token: nil)
        }
        let planner = MigrationPlanner(old: old, new: new)
        let emap = planner.entityMap
        func famSQL(_ m: ResolvedModel, _ e: String) -> String { m.family[e]!.sorted().map { ResolvedModel.sqlLiteral(.text($0)) }.joined(separator: ", ") }
        let (reasons, steps) = try planner.plan(
            liveCount: { oe in
                if case .integer(let n) = try conn.scalar("SELECT count(*) FROM \(q(old.table(of: oe))) WHERE ended_gen = \(ResolvedModel.live) AND z_ent IN (\(famSQL(old, oe)))") { return Int(n) }
                return 0
            },
            nullCount: { oe, a in
                if case .integer(let n) = try conn.scalar("SELECT count(*) FROM \(q(old.table(of: oe))) WHERE ended_gen = \(ResolvedModel.live) AND z_ent IN (\(famSQL(old, oe))) AND \(q(ResolvedModel.attrColumn(a))) IS NULL") { return Int(n) }
                return 0
            })
        if !reasons.isEmpty { throw StorageError(.migrationNotInferable(reasons), "the model change is not a lightweight migration; nothing was changed") }

        if let b = backupPath, !dryRun {
            if FileManager.default.fileExists(atPath: b) { throw StorageError.invalid("backup path exists") }
            try conn.vacuumInto(b)
        }
        let gen = state.withLock { $0.generation } + 1
        try conn.exec("BEGIN IMMEDIATE")
        do {
            // 1. relationship pairs whose storage changes (read from the old layout, live rows only)
            var transfers: [(entity: String, rel: String, pairs: [(Int64, Int64)])] = []
            for e in new.definition.entities {
                for r in e.relationships {
                    guard let orl = planner.oldRelationship(e.name, r), let oe = emap[e.name] else { continue }
                    let os = old.storage(entity: oe, relationship: orl.name), ns = new.storage(entity: e.name, relationship: r.name)
                    if sameKind(os, ns) { continue }
                    transfers.append((e.name, r.name, try pairs(conn, old, os)))
                }
            }
            // 2. drop secondary indexes, rebuild every table into ubq_mig_* then swap
            var oldIndexes: [String] = []
            try conn.query("SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'ubq\\_%' ESCAPE '\\'") { oldIndexes.append($0.text(0)) }
            for i in oldIndexes { try conn.exec("DROP INDEX IF EXISTS \(q(i))") }
            let liveOnly = "ended_gen = \(ResolvedModel.live)"
            for root in new.roots {
                let tmp = "ubq_mig_" + root
                let cols = new.columns[root] ?? []
                var defs = ["pk INTEGER NOT NULL", "created_gen INTEGER NOT NULL", "ended_gen INTEGER NOT NULL", "version INTEGER NOT NULL", "z_ent TEXT NOT NULL"]
                for c in cols { defs.append("\(q(c)) \(new.columnType(root: root, column: c))") }
                try conn.exec("CREATE TABLE \(q(tmp)) (\(defs.joined(separator: ", ")), PRIMARY KEY (pk, ended_gen)) WITHOUT ROWID")
                guard let oldRoot = emap[root].flatMap({ old.root[$0] }) else { continue }
                // z_ent mapping for entities kept in this tree
                var cases: [String] = []
                for e in new.family[root]!.sorted() { if let oe = emap[e] { cases.append("WHEN \(ResolvedModel.sqlLiteral(.text(oe))) THEN \(ResolvedModel.sqlLiteral(.text(e)))") } }
                let kept = new.family[root]!.compactMap { emap[$0] }.map { ResolvedModel.sqlLiteral(.text($0)) }.joined(separator: ", ")
                var exprs: [String] = []
                for c in cols { exprs.append(try columnExpr(c, root: root, old: old, new: new, planner: planner)) }
                let sel = (["pk", "\(gen)", "ended_gen", "1", "CASE z_ent \(cases.joined(separator: " ")) END"] + exprs).joined(separator: ", ")
                try conn.exec("INSERT INTO \(q(tmp)) SELECT \(sel) FROM \(q(ResolvedModel.tableName(root: oldRoot))) WHERE \(liveOnly) AND z_ent IN (\(kept.isEmpty ? "NULL" : kept))")
            }
            // join tables: same-kind relationships copy their old join table (possibly renamed)
            for j in new.joinTables {
                try conn.exec("CREATE TABLE \(q("ubq_mig_" + j)) (src INTEGER NOT NULL, dst INTEGER NOT NULL, ended_gen INTEGER NOT NULL, created_gen INTEGER NOT NULL, PRIMARY KEY (src, dst, ended_gen)) WITHOUT ROWID")
            }
            var copiedJoins = Set<String>()
            for e in new.definition.entities {
                for r in e.relationships where r.toMany {
                    guard case .join(let nt, let nl) = new.storage(entity: e.name, relationship: r.name), !copiedJoins.contains(nt),
                          let orl = planner.oldRelationship(e.name, r), let oe = emap[e.name],
                          case .join(let ot, let ol) = old.storage(entity: oe, relationship: orl.name) else { continue }
                    copiedJoins.insert(nt)
                    let (s, d) = nl == ol ? ("src", "dst") : ("dst", "src")
                    try conn.exec("INSERT INTO \(q("ubq_mig_" + nt)) (src, dst, created_gen, ended_gen) SELECT \(s), \(d), \(gen), ended_gen FROM \(q(ot)) WHERE \(liveOnly)")
                }
            }
            var oldTables: [String] = []
            try conn.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND (name LIKE 't\\_%' ESCAPE '\\' OR name LIKE 'j\\_%' ESCAPE '\\')") { oldTables.append($0.text(0)) }
            for t in oldTables { try conn.exec("DROP TABLE \(q(t))") }
            for root in new.roots { try conn.exec("ALTER TABLE \(q("ubq_mig_" + root)) RENAME TO \(q(ResolvedModel.tableName(root: root)))") }
            for j in new.joinTables { try conn.exec("ALTER TABLE \(q("ubq_mig_" + j)) RENAME TO \(q(j))") }
            // 3. relationship pairs into their new storage
            for t in transfers {
                switch new.storage(entity: t.entity, relationship: t.rel) {
                case .join(let table, let left):
                    for (a, b) in t.pairs { try conn.run("INSERT OR IGNORE INTO \(q(table)) (src, dst, created_gen, ended_gen) VALUES (?, ?, \(gen), \(ResolvedModel.live))", left ? [.integer(a), .integer(b)] : [.integer(b), .integer(a)]) }
                case .inverseColumn(let table, let column):
                    for (a, b) in t.pairs { try conn.run("UPDATE \(q(table)) SET \(q(column)) = ? WHERE pk = ? AND \(liveOnly)", [.integer(a), .integer(b)]) }
                case .column(let table, let column):
                    for (a, b) in t.pairs { try conn.run("UPDATE \(q(table)) SET \(q(column)) = ? WHERE pk = ? AND \(liveOnly)", [.integer(b), .integer(a)]) }
                }
            }
            // 4. uniqueness constraints: list duplicates instead of a bare constraint error
            var dupReasons: [String] = []
            for e in new.definition.entities {
                for u in e.uniquenessConstraints {
                    let cols = u.map { q(new.propertyColumn(e.name, $0)) }.joined(separator: ", ")
                    var dups: [String] = []
                    try conn.query("SELECT \(cols), count(*) FROM \(q(new.table(of: e.name))) WHERE \(liveOnly) AND z_ent IN (\(famSQL(new, e.name))) GROUP BY \(cols) HAVING count(*) > 1 AND \(u.map { "\(q(new.propertyColumn(e.name, $0))) IS NOT NULL" }.joined(separator: " AND ")) LIMIT 20") { st in
                        dups.append("(" + (0..<u.count).map { "\(st.value($0))" }.joined(separator: ", ") + ") ×\(st.int(u.count))")
                    }
                    if !dups.isEmpty { dupReasons.append("\(e.name)(\(u.joined(separator: ", "))) has duplicates: \(dups.joined(separator: "; "))") }
                }
            }
            if !dupReasons.isEmpty { throw StorageError(.migrationNotInferable(dupReasons), "cannot add a uniqueness constraint; nothing was changed") }
            for s in new.createStatements() { try conn.exec(s) }
            try Meta.set(conn, "model_json", .text(String(decoding: try new.definition.jsonData(), as: UTF8.self)))
            try Meta.set(conn, "model_hash", .text(new.hash))
            try Meta.set(conn, "generation", .integer(gen))
            try Meta.set(conn, "gc_horizon", .integer(gen))
            try conn.run("INSERT INTO ubq_history (generation, timestamp, author, context, changes) VALUES (?, ?, 'ubiquity.migration', NULL, '[]')",
                         [.integer(gen), .integer(Int64(Date().timeIntervalSince1970 * 1000))])
            if dryRun {
                try conn.exec("ROLLBACK")
                conn.clearStatementCache()
                return MigrationReport(fromHash: old.hash, toHash: new.hash, steps: steps, dryRun: true, backupPath: nil, token: nil)
            }
            try conn.exec("COMMIT")
        } catch {
            if !conn.isAutocommit { try? conn.exec("ROLLBACK") }
            conn.clearStatementCache()
            throw error
        }
        conn.clearStatementCache()
        state.withLock { s in s.model = new; s.generation = gen; s.gcHorizon = gen; s.pins.removeAll() }
        config.logger.info("migrated store \(storeID) to model \(new.hash.prefix(12)): \(steps.joined(separator: "; "))")
        return MigrationReport(fromHash: old.hash, toHash: new.hash, steps: steps, dryRun: false, backupPath: backupPath,
                               token: GenerationToken(storeID: storeID, epoch: epoch, generation: gen))
    }

    private func sameKind(_ a: RelationshipStorage, _ b: RelationshipStorage) -> Bool {
        switch (a, b) {
        case (.column, .column), (.join, .join): return true
        case (.inverseColumn, .inverseColumn): return true
        default: return false
        }
    }

    /// (source pk, destination pk) pairs of live rows in a relationship's old storage.
    private func pairs(_ conn: Connection, _ m: ResolvedModel, _ s: RelationshipStorage) throws -> [(Int64, Int64)] {
        var out: [(Int64, Int64)] = []
        let live = "ended_gen = \(ResolvedModel.live)"
        switch s {
        case .column(let t, let c):
            try conn.query("SELECT pk, \(q(c)) FROM \(q(t)) WHERE \(live) AND \(q(c)) IS NOT NULL") { out.append(($0.int(0), $0.int(1))) }
        case .inverseColumn(let t, let c):
            try conn.query("SELECT \(q(c)), pk FROM \(q(t)) WHERE \(live) AND \(q(c)) IS NOT NULL") { out.append(($0.int(0), $0.int(1))) }
        case .join(let t, let left):
            try conn.query("SELECT \(left ? "src, dst" : "dst, src") FROM \(q(t)) WHERE \(live)") { out.append(($0.int(0), $0.int(1))) }
        }
        return out
    }

    /// The SELECT expression producing a new column from the old table.
    private func columnExpr(_ c: String, root: String, old: ResolvedModel, new: ResolvedModel, planner: MigrationPlanner) throws -> String {
        let name = String(c.dropFirst(2))
        let owner = new.definition.entities.first { e in
            new.root[e.name] == root && (c.hasPrefix("a_") ? e.attributes.contains { $0.name == name } : e.relationships.contains { $0.name == name })
        }!
        let fam = new.family[owner.name]!.compactMap { planner.entityMap[$0] }.map { ResolvedModel.sqlLiteral(.text($0)) }.joined(separator: ", ")
        if c.hasPrefix("a_") {
            let a = owner.attributes.first { $0.name == name }!
            let dflt = a.defaultValue.map { ResolvedModel.sqlLiteral(ResolvedModel.toSQL($0, a.type)) } ?? "NULL"
            if let oa = planner.oldAttribute(owner.name, a) {
                let oc = q(ResolvedModel.attrColumn(oa.name))
                return (!a.optional && dflt != "NULL") ? "COALESCE(\(oc), CASE WHEN z_ent IN (\(fam.isEmpty ? "NULL" : fam)) THEN \(dflt) END)" : oc
            }
            return dflt == "NULL" || fam.isEmpty ? "NULL" : "CASE WHEN z_ent IN (\(fam)) THEN \(dflt) END"
        }
        let r = owner.relationships.first { $0.name == name }!
        if let orl = planner.oldRelationship(owner.name, r), !orl.toMany { return q(ResolvedModel.relColumn(orl.name)) }
        return "NULL"
    }
}

/// The backups migrations take next to a store file when the caller names none:
/// `<store file>.pre-migration-<µs since 1970, 17 digits>-g<generation>`. The microsecond time
/// keeps two migrations in the same second (or a retry right after a crash) from meeting an
/// existing name, the generation says which state the backup holds, and names sort by age.
struct MigrationBackups: Sendable {
    let storePath: String
    var prefix: String { (storePath as NSString).lastPathComponent + ".pre-migration-" }
    var directory: String { (storePath as NSString).deletingLastPathComponent }

    /// A name no file has yet (a clock step backwards could repeat a time: then a suffix).
    func newName(generation: Int64, now: Date = Date()) -> String {
        let micros = Int64(now.timeIntervalSince1970 * 1_000_000)
        let base = storePath + ".pre-migration-" + String(format: "%017lld", micros) + "-g\(generation)"
        var name = base
        var n = 1
        while FileManager.default.fileExists(atPath: name) { n += 1; name = base + "-\(n)" }
        return name
    }

    /// The store's default-named backups, oldest first.
    func list() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        // by the time in the name, as a number: older names held seconds, not microseconds
        func time(_ n: String) -> Int64 { Int64(n.dropFirst(prefix.count).prefix { $0.isNumber }) ?? 0 }
        return names.filter(isDefaultName).sorted { (time($0), $0) < (time($1), $1) }.map { directory + "/" + $0 }
    }

    /// Whether `name` is one `newName` makes (`<time>-g<generation>[-<n>]`) or the older
    /// `<seconds>` form — never a name a caller chose, even one that starts with the prefix.
    func isDefaultName(_ name: String) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        let parts = name.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
        func digits(_ s: Substring) -> Bool { !s.isEmpty && s.allSatisfy { $0.isASCII && $0.isNumber } }
        guard let time = parts.first, digits(time), parts.count <= 3 else { return false }
        if parts.count >= 2 { guard parts[1].first == "g", digits(parts[1].dropFirst()) else { return false } }
        if parts.count == 3 { guard digits(parts[2]) else { return false } }
        return true
    }

    /// Removes all but the newest `keeping` (at least 1) default-named backups. A backup is a
    /// closed, standalone file (VACUUM INTO writes no WAL), so removing it touches no open database.
    func prune(keeping: Int) {
        for old in list().dropLast(max(1, keeping)) { try? FileManager.default.removeItem(atPath: old) }
    }
}
