import Crypto
import Foundation

public enum AttributeType: String, Codable, Sendable, CaseIterable {
    case string, bool, int16, int32, int64, float, double, decimal, date, binary, uuid, uri
}

public enum DeleteRule: String, Codable, Sendable { case nullify, cascade, deny, noAction }

public struct AttributeDefinition: Codable, Sendable, Equatable {
    public var name: String
    public var type: AttributeType
    public var optional: Bool
    public var defaultValue: StorageValue?
    /// Numeric bounds for numbers and dates; length bounds for strings and binaries.
    public var minimum: Double?
    public var maximum: Double?
    /// Keep the value in history tombstones when the object is deleted.
    public var keepOnDelete: Bool
    /// The name this attribute had in the previous model version (lightweight rename).
    public var renamingIdentifier: String?

    public init(name: String, type: AttributeType, optional: Bool = true, defaultValue: StorageValue? = nil,
                minimum: Double? = nil, maximum: Double? = nil, keepOnDelete: Bool = false, renamingIdentifier: String? = nil) {
        self.name = name; self.type = type; self.optional = optional; self.defaultValue = defaultValue
        self.minimum = minimum; self.maximum = maximum; self.keepOnDelete = keepOnDelete; self.renamingIdentifier = renamingIdentifier
    }

    enum CodingKeys: String, CodingKey { case name, type, optional, defaultValue, minimum, maximum, keepOnDelete, renamingIdentifier }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        type = try c.decode(AttributeType.self, forKey: .type)
        optional = try c.decodeIfPresent(Bool.self, forKey: .optional) ?? true
        defaultValue = try c.decodeIfPresent(StorageValue.self, forKey: .defaultValue)
        minimum = try c.decodeIfPresent(Double.self, forKey: .minimum)
        maximum = try c.decodeIfPresent(Double.self, forKey: .maximum)
        keepOnDelete = try c.decodeIfPresent(Bool.self, forKey: .keepOnDelete) ?? false
        renamingIdentifier = try c.decodeIfPresent(String.self, forKey: .renamingIdentifier)
    }
}

public struct RelationshipDefinition: Codable, Sendable, Equatable {
    public var name: String
    public var destination: String
    public var toMany: Bool
    public var inverse: String?
    public var deleteRule: DeleteRule
    public var optional: Bool
    public var minCount: Int?
    public var maxCount: Int?
    public var renamingIdentifier: String?

    public init(name: String, destination: String, toMany: Bool = false, inverse: String? = nil, deleteRule: DeleteRule = .nullify,
                optional: Bool = true, minCount: Int? = nil, maxCount: Int? = nil, renamingIdentifier: String? = nil) {
        self.name = name; self.destination = destination; self.toMany = toMany; self.inverse = inverse; self.deleteRule = deleteRule
        self.optional = optional; self.minCount = minCount; self.maxCount = maxCount; self.renamingIdentifier = renamingIdentifier
    }

    enum CodingKeys: String, CodingKey { case name, destination, toMany, inverse, deleteRule, optional, minCount, maxCount, renamingIdentifier }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        destination = try c.decode(String.self, forKey: .destination)
        toMany = try c.decodeIfPresent(Bool.self, forKey: .toMany) ?? false
        inverse = try c.decodeIfPresent(String.self, forKey: .inverse)
        deleteRule = try c.decodeIfPresent(DeleteRule.self, forKey: .deleteRule) ?? .nullify
        optional = try c.decodeIfPresent(Bool.self, forKey: .optional) ?? true
        minCount = try c.decodeIfPresent(Int.self, forKey: .minCount)
        maxCount = try c.decodeIfPresent(Int.self, forKey: .maxCount)
        renamingIdentifier = try c.decodeIfPresent(String.self, forKey: .renamingIdentifier)
    }
}

public struct EntityDefinition: Codable, Sendable, Equatable {
    public var name: String
    public var parent: String?
    public var isAbstract: Bool
    public var attributes: [AttributeDefinition]
    public var relationships: [RelationshipDefinition]
    /// Each index is a list of attribute names.
    public var indexes: [[String]]
    /// Each constraint is a list of attribute names unique together among live objects of the entity tree.
    public var uniquenessConstraints: [[String]]
    public var renamingIdentifier: String?

    public init(name: String, parent: String? = nil, isAbstract: Bool = false, attributes: [AttributeDefinition] = [],
                relationships: [RelationshipDefinition] = [], indexes: [[String]] = [], uniquenessConstraints: [[String]] = [],
                renamingIdentifier: String? = nil) {
        self.name = name; self.parent = parent; self.isAbstract = isAbstract; self.attributes = attributes
        self.relationships = relationships; self.indexes = indexes; self.uniquenessConstraints = uniquenessConstraints
        self.renamingIdentifier = renamingIdentifier
    }

    enum CodingKeys: String, CodingKey { case name, parent, isAbstract, attributes, relationships, indexes, uniquenessConstraints, renamingIdentifier }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        parent = try c.decodeIfPresent(String.self, forKey: .parent)
        isAbstract = try c.decodeIfPresent(Bool.self, forKey: .isAbstract) ?? false
        attributes = try c.decodeIfPresent([AttributeDefinition].self, forKey: .attributes) ?? []
        relationships = try c.decodeIfPresent([RelationshipDefinition].self, forKey: .relationships) ?? []
        indexes = try c.decodeIfPresent([[String]].self, forKey: .indexes) ?? []
        uniquenessConstraints = try c.decodeIfPresent([[String]].self, forKey: .uniquenessConstraints) ?? []
        renamingIdentifier = try c.decodeIfPresent(String.self, forKey: .renamingIdentifier)
    }
}

/// A model version as clients send it (JSON-loadable for the CLI).
public struct ModelDefinition: Codable, Sendable, Equatable {
    public var versionIdentifier: String?
    public var entities: [EntityDefinition]
    public init(versionIdentifier: String? = nil, entities: [EntityDefinition]) { self.versionIdentifier = versionIdentifier; self.entities = entities }

    public static func fromJSON(_ data: Data) throws -> ModelDefinition {
        do { return try JSONDecoder().decode(ModelDefinition.self, from: data) } catch {
            throw StorageError(.invalidArgument, "model JSON: \(error)")
        }
    }
    public func jsonData() throws -> Data {
        let e = JSONEncoder(); e.outputFormatting = [.sortedKeys]
        return try e.encode(self)
    }

    /// SHA-256 (hex) of a canonical encoding of everything that shapes stored data: entity, attribute
    /// and relationship names, types, optionality, defaults, bounds, inheritance, indexes and
    /// constraints — in sorted order. Renaming identifiers and the version identifier are excluded
    /// (like Core Data's version hashes).
    public var versionHash: String {
        var s = "ubiquity-model-v1\n"
        for e in entities.sorted(by: { $0.name < $1.name }) {
            s += "E \(e.name) p=\(e.parent ?? "-") abs=\(e.isAbstract)\n"
            for a in e.attributes.sorted(by: { $0.name < $1.name }) {
                s += " A \(a.name) \(a.type.rawValue) opt=\(a.optional) def=\(a.defaultValue.map(canon) ?? "-")"
                s += " min=\(a.minimum.map { "\($0)" } ?? "-") max=\(a.maximum.map { "\($0)" } ?? "-") keep=\(a.keepOnDelete)\n"
            }
            for r in e.relationships.sorted(by: { $0.name < $1.name }) {
                s += " R \(r.name) -> \(r.destination) many=\(r.toMany) inv=\(r.inverse ?? "-") del=\(r.deleteRule.rawValue)"
                s += " opt=\(r.optional) min=\(r.minCount ?? -1) max=\(r.maxCount ?? -1)\n"
            }
            for i in e.indexes.map({ $0.joined(separator: ",") }).sorted() { s += " I \(i)\n" }
            for u in e.uniquenessConstraints.map({ $0.joined(separator: ",") }).sorted() { s += " U \(u)\n" }
        }
        return SHA256.hash(data: Array(s.utf8)).hex
    }

    private func canon(_ v: StorageValue) -> String {
        switch v {
        case .binary(let d): return "bin:" + d.map { String(format: "%02x", $0) }.joined()
        default: return "\(v.typeName):\(v)"
        }
    }
}

// MARK: - Resolved model

/// How a relationship is stored.
enum RelationshipStorage: Equatable {
    /// A column `r_<name>` in the source entity's root table holding the destination pk.
    case column(table: String, column: String)
    /// Derived from the inverse to-one's column in the destination's root table.
    case inverseColumn(table: String, column: String)
    /// A versioned join table; `sourceIsLeft` tells which side this relationship reads from.
    case join(table: String, sourceIsLeft: Bool)
}

/// A validated model with everything precomputed for the engine. Immutable and Sendable.
final class ResolvedModel: Sendable {
    let definition: ModelDefinition
    let hash: String
    let entities: [String: EntityDefinition]
    /// Entity → its root entity (itself if no parent).
    let root: [String: String]
    /// Entity → ancestor chain including itself (root first).
    let chain: [String: [String]]
    /// Entity → itself and all descendants.
    let family: [String: Set<String>]
    /// Entity → all attributes including inherited, by name.
    let attributes: [String: [String: AttributeDefinition]]
    let attributeOrder: [String: [String]]
    let relationships: [String: [String: RelationshipDefinition]]
    /// Root entity → ordered attribute/relationship columns of its table (over the whole tree).
    let columns: [String: [String]]
    /// Per root: cached SQL text (statement-cache keys; built once per model).
    let selectPrefixSQL: [String: String]
    let insertSQL: [String: String]
    let currentRowSQL: [String: String]
    /// Entities with a relationship whose count or presence must be validated after a save.
    let countChecked: Set<String>

    static func tableName(root: String) -> String { "t_" + root }
    static func attrColumn(_ name: String) -> String { "a_" + name }
    static func relColumn(_ name: String) -> String { "r_" + name }

    init(_ def: ModelDefinition) throws {
        let issues = ResolvedModel.validate(def)
        if !issues.isEmpty { throw StorageError(.validationFailed(issues), "invalid model") }
        definition = def
        hash = def.versionHash
        var ents: [String: EntityDefinition] = [:]
        for e in def.entities { ents[e.name] = e }
        entities = ents
        var root: [String: String] = [:], chain: [String: [String]] = [:]
        for e in def.entities {
            var c = [e.name]; var cur = e
            while let p = cur.parent, let pe = ents[p] { c.insert(p, at: 0); cur = pe }
            chain[e.name] = c; root[e.name] = c[0]
        }
        self.root = root; self.chain = chain
        var family: [String: Set<String>] = [:]
        for e in def.entities { for a in chain[e.name]! { family[a, default: []].insert(e.name) } }
        self.family = family
        var attrs: [String: [String: AttributeDefinition]] = [:], order: [String: [String]] = [:]
        var rels: [String: [String: RelationshipDefinition]] = [:]
        for e in def.entities {
            var a: [String: AttributeDefinition] = [:], o: [String] = [], r: [String: RelationshipDefinition] = [:]
            for anc in chain[e.name]! {
                for x in ents[anc]!.attributes { a[x.name] = x; o.append(x.name) }
                for x in ents[anc]!.relationships { r[x.name] = x }
            }
            attrs[e.name] = a; order[e.name] = o; rels[e.name] = r
        }
        attributes = attrs; attributeOrder = order; relationships = rels
        var cols: [String: [String]] = [:]
        for e in def.entities {  // definition order: stable column order
            let rt = root[e.name]!
            for a in e.attributes { cols[rt, default: []].append(ResolvedModel.attrColumn(a.name)) }
            for r in e.relationships where !r.toMany { cols[rt, default: []].append(ResolvedModel.relColumn(r.name)) }
            if cols[rt] == nil { cols[rt] = [] }
        }
        columns = cols
        var sel: [String: String] = [:], ins: [String: String] = [:], cur: [String: String] = [:]
        for (r, cs) in cols {
            let t = q(ResolvedModel.tableName(root: r))
            let list = cs.map(q).joined(separator: ", ")
            sel[r] = "SELECT pk, version, z_ent, created_gen\(list.isEmpty ? "" : ", " + list) FROM \(t) "
            cur[r] = sel[r]! + "WHERE pk = ? AND ended_gen = \(ResolvedModel.live)"
            let names = ["pk", "created_gen", "ended_gen", "version", "z_ent"] + cs.map(q)
            ins[r] = "INSERT INTO \(t) (\(names.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))"
        }
        selectPrefixSQL = sel; insertSQL = ins; currentRowSQL = cur
        countChecked = Set(rels.filter { $0.value.values.contains { !$0.optional || $0.minCount != nil || $0.maxCount != nil } }.keys)
    }

    var roots: [String] { definition.entities.filter { $0.parent == nil }.map(\.name).sorted() }

    func table(of entity: String) -> String { ResolvedModel.tableName(root: root[entity]!) }

    func storage(entity: String, relationship name: String) -> RelationshipStorage {
        let r = relationships[entity]![name]!
        if !r.toMany { return .column(table: table(of: entity), column: ResolvedModel.relColumn(name)) }
        if let inv = r.inverse, let ir = relationships[r.destination]?[inv] {
            if !ir.toMany { return .inverseColumn(table: table(of: r.destination), column: ResolvedModel.relColumn(inv)) }
            // many-to-many: one join table owned by the lexicographically smaller side
            let mine = "\(owner(entity, name))_\(name)", theirs = "\(owner(r.destination, inv))_\(inv)"
            return mine <= theirs ? .join(table: "j_" + mine, sourceIsLeft: true) : .join(table: "j_" + theirs, sourceIsLeft: false)
        }
        return .join(table: "j_\(owner(entity, name))_\(name)", sourceIsLeft: true)
    }

    /// The entity (in the chain) that declares a relationship.
    func owner(_ entity: String, _ rel: String) -> String {
        for e in chain[entity]!.reversed() where entities[e]!.relationships.contains(where: { $0.name == rel }) { return e }
        return entity
    }

    /// All join tables the model needs.
    var joinTables: [String] {
        var s = Set<String>()
        for e in definition.entities { for r in e.relationships where r.toMany {
            if case .join(let t, _) = storage(entity: e.name, relationship: r.name) { s.insert(t) }
        } }
        return s.sorted()
    }

    static func isIdentifier(_ s: String) -> Bool {
        guard let f = s.unicodeScalars.first, s.unicodeScalars.count <= 64, f.isASCII, f.properties.isAlphabetic else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
    }

    static func validate(_ def: ModelDefinition) -> [ValidationIssue] {
        var out: [ValidationIssue] = []
        func bad(_ e: String?, _ p: String? = nil, m: String) { out.append(ValidationIssue(.invalidModel, entity: e, property: p, m)) }
        func badName(_ e: String?, _ p: String? = nil, m: String) { out.append(ValidationIssue(.invalidName, entity: e, property: p, m)) }
        var names = Set<String>()
        let byName = Dictionary(def.entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        if def.entities.isEmpty { bad(nil, m: "a model needs at least one entity") }
        for e in def.entities {
            if !isIdentifier(e.name) { badName(e.name, m: "entity names are letters, digits and _ (start with a letter, ≤ 64)") }
            if !names.insert(e.name).inserted { bad(e.name, m: "duplicate entity") }
            if let p = e.parent {
                if byName[p] == nil { bad(e.name, m: "parent entity \(p) does not exist") }
                var seen: Set<String> = [e.name]; var cur = p
                while let pe = byName[cur] {
                    if !seen.insert(cur).inserted { bad(e.name, m: "inheritance cycle"); break }
                    guard let n = pe.parent else { break }; cur = n
                }
            }
        }
        if !out.isEmpty { return out }
        func inherited(_ e: EntityDefinition) -> (attrs: [String: AttributeDefinition], rels: [String: RelationshipDefinition]) {
            var a: [String: AttributeDefinition] = [:], r: [String: RelationshipDefinition] = [:]
            var c: [EntityDefinition] = [e]; var cur = e
            while let p = cur.parent, let pe = byName[p] { c.append(pe); cur = pe }
            for x in c { for at in x.attributes { a[at.name] = at }; for rl in x.relationships { r[rl.name] = rl } }
            return (a, r)
        }
        // column names must be unique across a whole inheritance tree (one table per root)
        var treeCols: [String: [String: String]] = [:]
        for e in def.entities {
            var rootName = e.name; var cur = e
            while let p = cur.parent, let pe = byName[p] { rootName = p; cur = pe }
            for n in e.attributes.map(\.name) + e.relationships.map(\.name) {
                if let other = treeCols[rootName]?[n] { bad(e.name, n, m: "property \(n) is also declared by \(other) in the same entity tree") }
                treeCols[rootName, default: [:]][n] = e.name
            }
        }
        for e in def.entities {
            let (allA, allR) = inherited(e)
            for a in e.attributes {
                if !isIdentifier(a.name) { badName(e.name, a.name, m: "invalid attribute name") }
                if let d = a.defaultValue, !d.isNull, let err = typeError(a, d) { bad(e.name, a.name, m: "default value: \(err)") }
                if let lo = a.minimum, let hi = a.maximum, lo > hi { bad(e.name, a.name, m: "minimum \(lo) > maximum \(hi)") }
                // NaN and infinities: no meaningful bound, and the model is kept as JSON, which has no
                // such numbers (they used to fail the encoding: INTERNAL).
                if let lo = a.minimum, !lo.isFinite { bad(e.name, a.name, m: "minimum must be a finite number, not \(lo)") }
                if let hi = a.maximum, !hi.isFinite { bad(e.name, a.name, m: "maximum must be a finite number, not \(hi)") }
                if case .double(let d)? = a.defaultValue, !d.isFinite { bad(e.name, a.name, m: "default value must be a finite number, not \(d)") }
            }
            for r in e.relationships {
                if !isIdentifier(r.name) { badName(e.name, r.name, m: "invalid relationship name") }
                if allA[r.name] != nil { bad(e.name, r.name, m: "relationship and attribute share a name") }
                guard let dest = byName[r.destination] else { bad(e.name, r.name, m: "destination entity \(r.destination) does not exist"); continue }
                if let lo = r.minCount, let hi = r.maxCount, hi > 0, lo > hi { bad(e.name, r.name, m: "minCount > maxCount") }
                if let inv = r.inverse {
                    guard let ir = inherited(dest).rels[inv] else { bad(e.name, r.name, m: "inverse \(r.destination).\(inv) does not exist"); continue }
                    if ir.inverse != r.name { bad(e.name, r.name, m: "inverse \(r.destination).\(inv) does not name \(r.name) as its inverse") }
                    if !(byName[ir.destination].map { isSameOrAncestor($0.name, of: e.name, byName) } ?? false) {
                        bad(e.name, r.name, m: "inverse \(r.destination).\(inv) points to \(ir.destination), not \(e.name)")
                    }
                }
            }
            for (kind, lists) in [("index", e.indexes), ("uniqueness constraint", e.uniquenessConstraints)] {
                for l in lists {
                    if l.isEmpty { bad(e.name, m: "empty \(kind)") }
                    for p in l where allA[p] == nil && !(allR[p].map { !$0.toMany } ?? false) {
                        bad(e.name, p, m: "\(kind) names \(p), which is not an attribute or to-one relationship")
                    }
                }
            }
        }
        return out
    }

    static func isSameOrAncestor(_ a: String, of e: String, _ byName: [String: EntityDefinition]) -> Bool {
        var cur: String? = e
        while let c = cur { if c == a { return true }; cur = byName[c]?.parent }
        return false
    }

    /// nil if `v` is acceptable for the attribute's type (before bounds), else why not.
    static func typeError(_ a: AttributeDefinition, _ v: StorageValue) -> String? { typeError(a.type, v) }

    /// `typeError` for an attribute of type `type` (it reads nothing else of the definition).
    static func typeError(_ type: AttributeType, _ v: StorageValue) -> String? {
        switch (type, v) {
        case (.string, .string), (.bool, .bool), (.decimal, .decimal), (.date, .date), (.binary, .binary), (.uuid, .uuid), (.uri, .uri),
             (.double, .double), (.float, .int), (.double, .int), (.decimal, .int): break
        case (.int16, .int(let i)): if i < Int64(Int16.min) || i > Int64(Int16.max) { return "\(i) out of int16 range" }
        case (.int32, .int(let i)): if i < Int64(Int32.min) || i > Int64(Int32.max) { return "\(i) out of int32 range" }
        case (.int64, .int): break
        // a finite double past Float's range would be stored as ±inf: refuse it (infinities and
        // NaN given as such are representable and pass, as for double)
        case (.float, .double(let d)): if d.isFinite && abs(d) > Double(Float.greatestFiniteMagnitude) { return "\(d) out of float range" }
        default: return "expected \(type.rawValue), got \(v.typeName)"
        }
        if case .decimal(let s) = v, Decimal(string: s) == nil { return "not a decimal: \(s)" }
        if case .uri(let s) = v, URL(string: s) == nil { return "not a URI" }
        if case .double(let d) = v, !d.isFinite, type == .decimal { return "not finite" }
        // SQLite stores NaN as NULL: a save would silently turn the value into nil.
        if case .double(let d) = v, d.isNaN { return "NaN cannot be stored (SQLite keeps it as NULL)" }
        if case .date(let d) = v, d.isNaN { return "NaN is not a date" }
        return nil
    }

    static func sqlType(_ t: AttributeType) -> String {
        switch t {
        case .string, .decimal, .uri, .uuid: "TEXT"
        case .bool, .int16, .int32, .int64: "INTEGER"
        case .float, .double, .date: "REAL"
        case .binary: "BLOB"
        }
    }

    static func toSQL(_ v: StorageValue, _ t: AttributeType) -> SQLValue {
        switch v {
        case .null: return .null
        case .string(let s): return .text(s)
        case .bool(let b): return .integer(b ? 1 : 0)
        case .int(let i):
            switch t { case .float, .double: return .real(Double(i)); case .decimal: return .text(String(i)); default: return .integer(i) }
        case .double(let d): return .real(d)
        case .decimal(let s): return .text(Decimal(string: s).map { "\($0)" } ?? s)
        case .date(let d): return .real(d)
        case .binary(let d): return .blob(Array(d))
        case .uuid(let u): return .text(u.uuidString.lowercased())
        case .uri(let s): return .text(s)
        }
    }

    static func fromSQL(_ v: SQLValue, _ t: AttributeType) -> StorageValue {
        if case .null = v { return .null }
        switch (t, v) {
        case (.string, .text(let s)): return .string(s)
        case (.uri, .text(let s)): return .uri(s)
        case (.decimal, .text(let s)): return .decimal(s)
        case (.uuid, .text(let s)): return UUID(uuidString: s).map { .uuid($0) } ?? .string(s)
        case (.bool, .integer(let i)): return .bool(i != 0)
        case (.int16, .integer(let i)), (.int32, .integer(let i)), (.int64, .integer(let i)): return .int(i)
        case (.float, .real(let d)), (.double, .real(let d)): return .double(d)
        case (.float, .integer(let i)), (.double, .integer(let i)): return .double(Double(i))
        case (.date, .real(let d)): return .date(d)
        case (.date, .integer(let i)): return .date(Double(i))
        case (.binary, .blob(let b)): return .binary(Data(b))
        case (_, .text(let s)): return .string(s)
        case (_, .integer(let i)): return .int(i)
        case (_, .real(let d)): return .double(d)
        case (_, .blob(let b)): return .binary(Data(b))
        default: return .null
        }
    }

    static func sqlLiteral(_ v: SQLValue) -> String {
        switch v {
        case .null: return "NULL"
        case .integer(let i): return String(i)
        case .real(let d): return d.isFinite ? "\(d)" : "NULL"
        case .text(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let b): return "X'" + b.map { String(format: "%02X", $0) }.joined() + "'"
        }
    }

    // MARK: DDL

    static let live = "9223372036854775807"

    /// DDL creating the tables and indexes of this model (IF NOT EXISTS).
    func createStatements() -> [String] {
        var out: [String] = []
        for r in roots {
            let t = ResolvedModel.tableName(root: r)
            var cols = ["pk INTEGER NOT NULL", "created_gen INTEGER NOT NULL", "ended_gen INTEGER NOT NULL", "version INTEGER NOT NULL", "z_ent TEXT NOT NULL"]
            for c in columns[r] ?? [] { cols.append("\(q(c)) \(columnType(root: r, column: c))") }
            out.append("CREATE TABLE IF NOT EXISTS \(q(t)) (\(cols.joined(separator: ", ")), PRIMARY KEY (pk, ended_gen)) WITHOUT ROWID")
            out.append("CREATE INDEX IF NOT EXISTS \(q("ubq_gc_" + r)) ON \(q(t)) (ended_gen) WHERE ended_gen < \(ResolvedModel.live)")
        }
        for j in joinTables {
            out.append("CREATE TABLE IF NOT EXISTS \(q(j)) (src INTEGER NOT NULL, dst INTEGER NOT NULL, ended_gen INTEGER NOT NULL, created_gen INTEGER NOT NULL, PRIMARY KEY (src, dst, ended_gen)) WITHOUT ROWID")
            out.append("CREATE INDEX IF NOT EXISTS \(q("ubq_jd_" + j)) ON \(q(j)) (dst, ended_gen)")
        }
        out.append(contentsOf: indexStatements())
        return out
    }

    func columnType(root: String, column: String) -> String {
        if column.hasPrefix("r_") { return "INTEGER" }
        let name = String(column.dropFirst(2))
        for e in family[root] ?? [] { if let a = entities[e]!.attributes.first(where: { $0.name == name }) { return ResolvedModel.sqlType(a.type) } }
        return ""
    }

    func propertyColumn(_ entity: String, _ p: String) -> String {
        attributes[entity]![p] != nil ? ResolvedModel.attrColumn(p) : ResolvedModel.relColumn(p)
    }

    /// Secondary indexes: named `ubq_ix_<entity>_<n>` / unique `ubq_ux_<entity>_<n>` (partial on live rows).
    func indexStatements() -> [String] {
        var out: [String] = []
        // to-one columns: inverse lookups, delete rules
        for r in roots {
            for c in columns[r] ?? [] where c.hasPrefix("r_") {
                out.append("CREATE INDEX IF NOT EXISTS \(q("ubq_rx_\(r)_\(c)")) ON \(q(ResolvedModel.tableName(root: r))) (\(q(c)), ended_gen)")
            }
        }
        for e in definition.entities.sorted(by: { $0.name < $1.name }) {
            let t = q(table(of: e.name))
            for (i, idx) in e.indexes.enumerated() {
                let cols = idx.map { q(propertyColumn(e.name, $0)) }.joined(separator: ", ")
                out.append("CREATE INDEX IF NOT EXISTS \(q("ubq_ix_\(e.name)_\(i)")) ON \(t) (\(cols))")
            }
            for (i, u) in e.uniquenessConstraints.enumerated() {
                let cols = u.map { q(propertyColumn(e.name, $0)) }.joined(separator: ", ")
                out.append("CREATE UNIQUE INDEX IF NOT EXISTS \(q("ubq_ux_\(e.name)_\(i)")) ON \(t) (\(cols)) WHERE ended_gen = \(ResolvedModel.live)")
            }
        }
        return out
    }
}
