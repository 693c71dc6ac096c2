// The SQL compiler: typed predicates to parameterized SQL. Every value is bound (`?N`); every
// identifier comes from the store's table mapping (never from request text) and is quoted.
// `?1` is always the generation read, and every table a query touches is filtered to the row
// versions visible at it (`created_gen <= ?1 AND ended_gen > ?1`). docs/query.md, "SQL shape".
import Foundation
import UbiquityStorage

/// SQL identifier quoting. Identifiers come from the model's mapping, never from request text.
func q(_ ident: String) -> String {
    // Foundation's replacingOccurrences only when there is a quote to double (never for model names in practice)
    ident.utf8.contains(34) ? "\"" + ident.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : "\"" + ident + "\""
}

/// One query level (the main query or an EXISTS / scalar subquery): its alias and the LEFT JOINs
/// its to-one key paths need (one per distinct path, shared by all references).
final class SQLScope {
    let entity: String
    let alias: String
    let parent: SQLScope?
    var joins: [String] = []
    var joinAliases: [String: (alias: String, entity: String)] = [:]

    init(entity: String, alias: String, parent: SQLScope?) { self.entity = entity; self.alias = alias; self.parent = parent }
}

final class SQLBuilder {
    let schema: Schema
    let storeID: UUID
    /// `?1` is the generation; later values follow in order.
    var arguments: [StorageValue]
    private var aliasCounter = 0

    init(schema: Schema, storeID: UUID, generation: Int64) {
        self.schema = schema; self.storeID = storeID; self.arguments = [.int(generation)]
    }

    func bind(_ v: StorageValue) -> String { arguments.append(v); return "?\(arguments.count)" }
    func bindScalar(_ s: Scalar) -> String { bind(s.storageValue) }

    func newAlias(_ prefix: String) -> String { aliasCounter += 1; return "\(prefix)\(aliasCounter)" }

    static func visible(_ alias: String) -> String { "\(alias).created_gen <= ?1 AND \(alias).ended_gen > ?1" }

    func table(_ entity: String) -> String { q(schema.mapping[entity]!.table) }
    func column(_ entity: String, _ property: String) -> String { q(schema.mapping[entity]!.columns[property]!) }

    /// Follows to-one hops from `scope` with LEFT JOINs (a missing object gives NULLs).
    func join(_ hops: ArraySlice<Hop>, in scope: SQLScope) -> (alias: String, entity: String) {
        var cur = (alias: scope.alias, entity: scope.entity)
        var key = ""
        for h in hops {
            key += "." + h.relationship
            if let j = scope.joinAliases[key] { cur = j; continue }
            let a = newAlias("t")
            scope.joins.append("LEFT JOIN \(table(h.destination)) AS \(a) ON \(a).pk = \(cur.alias).\(column(h.entity, h.relationship)) AND \(SQLBuilder.visible(a))")
            cur = (a, h.destination)
            scope.joinAliases[key] = cur
        }
        return cur
    }

    /// The SQL expression of a scalar path (decimals as REAL so they compare numerically).
    func expression(_ p: ScalarPath, in scope: SQLScope, comparable: Bool = true) -> String {
        let (alias, entity) = join(p.hops[...], in: scope)
        switch p.terminal {
        case .selfObject: return "\(alias).pk"
        case .relationship(let r, _): return "\(alias).\(column(entity, r))"
        case .attribute(let n, let t):
            let c = "\(alias).\(column(entity, n))"
            return t == .decimal && comparable ? "CAST(\(c) AS REAL)" : c
        }
    }

    /// FROM and WHERE of a subquery over a collection's elements, correlated with `outer`.
    /// Leading to-one hops join in the outer scope; the rest are inner joins in the subquery.
    func collection(_ c: CollectionPath, outer: SQLScope) -> (from: String, condition: String, scope: SQLScope) {
        let first = c.hops.firstIndex { $0.toMany }!
        let start = join(c.hops[..<first], in: outer)
        var from = ""
        var condition = ""
        var cur = start
        for (k, h) in c.hops[first...].enumerated() {
            let a = newAlias("s")
            let dst = table(h.destination)
            var on = ""
            if !h.toMany {
                from += " JOIN \(dst) AS \(a) ON \(a).pk = \(cur.alias).\(column(h.entity, h.relationship)) AND \(SQLBuilder.visible(a))"
                cur = (a, h.destination)
                continue
            }
            switch schema.mapping[h.entity]!.toMany[h.relationship]! {
            case .inverseColumn(let t, let col):
                on = "\(a).\(q(col)) = \(cur.alias).pk AND \(SQLBuilder.visible(a))"
                if k == 0 { from = "\(q(t)) AS \(a)"; condition = on } else { from += " JOIN \(q(t)) AS \(a) ON \(on)" }
            case .joinTable(let t, let src, let dstCol):
                let j = newAlias("j")
                let link = "\(j).\(q(src)) = \(cur.alias).pk AND \(SQLBuilder.visible(j))"
                let target = "\(dst) AS \(a) ON \(a).pk = \(j).\(q(dstCol)) AND \(SQLBuilder.visible(a))"
                if k == 0 { from = "\(q(t)) AS \(j) JOIN \(target)"; condition = link } else { from += " JOIN \(q(t)) AS \(j) ON \(link) JOIN \(target)" }
            }
            cur = (a, h.destination)
        }
        return (from, condition, SQLScope(entity: cur.entity, alias: cur.alias, parent: outer))
    }

    func subquery(_ select: String, _ c: CollectionPath, outer: SQLScope, _ body: (SQLScope) throws -> String?) rethrows -> String {
        let (from, condition, inner) = collection(c, outer: outer)
        let extra = try body(inner)
        let joins = inner.joins.isEmpty ? "" : " " + inner.joins.joined(separator: " ")
        return "(SELECT \(select) FROM \(from)\(joins) WHERE \(condition)\(extra.map { " AND (\($0))" } ?? ""))"
    }

    // MARK: predicates

    /// The deepest AND/OR nesting the SQL of a predicate may have (see `predicate`): what this
    /// SQLite's parser takes with room to spare (84 left-leaning levels inside a WHERE clause).
    static let maxSQLNesting = 76

    /// SQL for a predicate. NULL means false, as in the evaluator; NOT is made two-valued.
    ///
    /// SQLite's parser has a fixed stack (Debian's 3.40: 100 entries, then "parser stack
    /// overflow"): each nested `NOT COALESCE(` costs about 4 entries and each right-nested
    /// `x AND (` about 3, so 23 NOTs or 31 alternations failed — well inside QueryLimits.maxDepth.
    /// The predicate is therefore put in negation normal form first (`normalized`: NOT only
    /// directly on comparisons and quantifiers, never nested), and AND/OR operands are emitted
    /// deepest first so the nesting leans left — `((… OR b) AND c)` costs one entry per level.
    func predicate(_ p: Pred, _ scope: SQLScope, aliases: [String] = []) throws -> String {
        try sql(p.normalized(), scope, aliases: aliases, nesting: 0)
    }

    /// `nesting`: parser stack entries the enclosing AND/ORs cost (1 for a first operand, 3 for a later one).
    private func sql(_ p: Pred, _ scope: SQLScope, aliases: [String], nesting: Int) throws -> String {
        switch p {
        case .constant(let b): return b ? "1" : "0"
        case .and(let l): return try connective(l, " AND ", scope, aliases: aliases, nesting: nesting)
        case .or(let l): return try connective(l, " OR ", scope, aliases: aliases, nesting: nesting)
        case .not(let x): return "NOT COALESCE(\(try sql(x, scope, aliases: aliases, nesting: nesting)), 0)"
        case .quantified(let quant, let c, let inner):
            switch quant {
            case .anyOf: return "EXISTS " + (try subquery("1", c, outer: scope) { try sql(inner, $0, aliases: aliases, nesting: nesting) })
            case .noneOf: return "NOT EXISTS " + (try subquery("1", c, outer: scope) { try sql(inner, $0, aliases: aliases, nesting: nesting) })
            case .allOf: return "NOT EXISTS " + (try subquery("1", c, outer: scope) { "NOT COALESCE(\(try sql(inner, $0, aliases: aliases, nesting: nesting)), 0)" })
            }
        case .compare(let c): return try compare(c, scope, aliases: aliases)
        }
    }

    private func connective(_ items: [Pred], _ op: String, _ scope: SQLScope, aliases: [String], nesting: Int) throws -> String {
        if nesting > Self.maxSQLNesting {
            throw QueryError(.limitExceeded, "predicate alternates AND and OR too deeply to run as SQL (the limit is \(Self.maxSQLNesting) levels)")
        }
        // deepest operand first (AND and OR are commutative here: every operand is evaluated, NULL is false)
        let ordered = items.enumerated().sorted { ($1.element.connectiveDepth, $0.offset) < ($0.element.connectiveDepth, $1.offset) }.map(\.element)
        var parts: [String] = []
        for (i, x) in ordered.enumerated() { parts.append(try sql(x, scope, aliases: aliases, nesting: nesting + (i == 0 ? 1 : 3))) }
        return "(" + parts.joined(separator: op) + ")"
    }

    func value(_ v: Value, _ scope: SQLScope, aliases: [String]) throws -> String {
        switch v {
        case .constant(let s): return bindScalar(s)
        case .list(let l): return "(" + l.map { bindScalar($0) }.joined(separator: ", ") + ")"
        case .objects(let ids, let family): return bindScalar(ids.first.map { Evaluator.objectKey($0, storeID: storeID, family: family) } ?? .null)
        case .path(let p): return expression(p, in: scope)
        case .outerPath(let p): return expression(p, in: scope.parent ?? scope)
        case .count(let c): return subquery("count(*)", c, outer: scope) { _ in nil }
        case .aggregate(let f, let c, let el):
            let (from, condition, inner) = collection(c, outer: scope)
            let e = expression(el, in: inner)
            let fn = switch f { case .sum: "coalesce(sum(\(e)), 0)"; case .avg: "avg(\(e))"; case .min: "min(\(e))"; case .max: "max(\(e))" }
            let joins = inner.joins.isEmpty ? "" : " " + inner.joins.joined(separator: " ")
            return "(SELECT \(fn) FROM \(from)\(joins) WHERE \(condition))"
        case .alias(let i, let n):
            guard i < aliases.count else { throw QueryError(.unknownKeyPath, "'\(n)' is not an expression of propertiesToFetch", field: "havingPredicate") }
            return aliases[i]
        }
    }

    func compare(_ c: Comparison, _ scope: SQLScope, aliases: [String]) throws -> String {
        let raw = try value(c.lhs, scope, aliases: aliases)
        let l = c.fold.isEmpty ? raw : "ubq_fold(\(raw), \(c.fold.rawValue))"
        switch c.pattern {
        case .wildcard(let w)?: return "\(l) GLOB \(bind(.string(w.glob)))"
        case .regex(_, let source, let maxSteps)?:
            return "ubq_regex(\(bind(.string(source))), \(raw), \(c.fold.rawValue), \(bind(.int(Int64(maxSteps)))))"
        case nil: break
        }
        func rhs() throws -> String {
            let r = try value(c.rhs, scope, aliases: aliases)
            return c.fold.isEmpty || c.rhs.isConstant ? r : "ubq_fold(\(r), \(c.fold.rawValue))"
        }
        let rhsIsNull: Bool = { if case .constant(.null) = c.rhs { return true }; return false }()
        switch c.op {
        case .eq:
            if rhsIsNull { return "\(l) IS NULL" }
            return c.rhs.isConstant ? "\(l) = \(try rhs())" : "\(l) IS \(try rhs())"
        case .ne:
            if rhsIsNull { return "\(l) IS NOT NULL" }
            return "\(l) IS NOT \(try rhs())"
        case .lt, .le, .gt, .ge: return "\(l) \(c.op.rawValue) \(try rhs())"
        case .between:
            guard case .list(let b) = c.rhs, b.count == 2 else { return "0" }
            return "\(l) BETWEEN \(bindScalar(b[0])) AND \(bindScalar(b[1]))"
        case .inList:
            switch c.rhs {
            case .list(let items):
                return items.isEmpty ? "0" : "\(l) IN (" + items.map { bindScalar($0) }.joined(separator: ", ") + ")"
            case .objects(let ids, let family):
                return ids.isEmpty ? "0" : "\(l) IN (" + ids.map { bindScalar(Evaluator.objectKey($0, storeID: storeID, family: family)) }.joined(separator: ", ") + ")"
            default: return "0"
            }
        default: return "0"
        }
    }
}

/// The SQL functions the compiled queries call, registered once per connection:
/// - `ubq_fold(text, options)`: `TextFold.fold` (options: 1 = [c], 2 = [d], 3 = [cd]);
/// - `ubq_regex(pattern, text, options, maxSteps)`: whole-string MATCHES with the bounded engine;
///   compiled programs are cached per connection (at most 32 patterns).
enum QueryFunctions {
    static let key = "ubiquity-query-1"

    /// Patterns reach SQL only after the checker compiled them within the request's limits, so
    /// the function's own compile uses fixed ceilings.
    static func install(_ ctx: ReadContext) throws {
        try ctx.installFunctions(key: key) {
            final class Cache { var programs: [String: RegexProgram] = [:] }
            let cache = Cache()
            let maxLength = 1 << 20, maxProgram = 1 << 20
            return [
                SQLFunction(name: "ubq_fold", argumentCount: 2) { a in
                    guard case .string(let s) = a[0], case .int(let f) = a[1] else { return a[0] }
                    return .string(TextFold.fold(s, FoldOptions(rawValue: Int(f))))
                },
                SQLFunction(name: "ubq_regex", argumentCount: 4) { a in
                    guard case .string(let pattern) = a[0], case .int(let f) = a[2], case .int(let maxSteps) = a[3] else { throw RegexError(message: "bad ubq_regex call") }
                    guard case .string(let text) = a[1] else { return .null }
                    let key = "\(f):" + pattern
                    let program: RegexProgram
                    if let p = cache.programs[key] { program = p } else {
                        program = try RegexProgram.compile(pattern, options: FoldOptions(rawValue: Int(f)), maxLength: maxLength, maxProgram: maxProgram)
                        if cache.programs.count >= 32 { cache.programs.removeAll() }
                        cache.programs[key] = program
                    }
                    return .int(try program.matches(text, maxSteps: Int(maxSteps)) ? 1 : 0)
                },
            ]
        }
    }
}
