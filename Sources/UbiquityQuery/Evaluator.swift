// The in-memory evaluator: runs the typed predicate over object snapshots (a context's pending
// objects). It follows the SQL compiler's semantics exactly (docs/query.md, "Semantics"):
// NULL never satisfies a comparison except `== nil` / `!= value`; NOT is two-valued; strings
// compare by UTF-8 bytes; ANY over nothing is false, ALL over nothing is true.
import Foundation
import UbiquityStorage

/// A parsed, type-checked predicate: reusable, and the in-memory evaluator.
public struct Predicate: Sendable {
    let root: Pred
    let schema: Schema
    public let entity: String
    public let text: String

    public static func parse(_ text: String, entity: String, model: ModelDefinition, variables: [String: QueryArgument] = [:],
                             limits: QueryLimits = QueryLimits()) throws -> Predicate {
        let schema: Schema
        do { schema = try Schema(model: model) } catch { throw QueryError(.unsupported, "the model is not valid: \(error)", field: "model") }
        return try Predicate(text, entity: entity, schema: schema, variables: variables, limits: limits)
    }

    init(_ text: String, entity: String, schema: Schema, variables: [String: QueryArgument], limits: QueryLimits, field: String = "predicate",
         aliases: AliasScope? = nil, trace: VariableTrace? = nil) throws {
        guard schema.entities[entity] != nil else { throw QueryError(.unknownEntity, "no entity named '\(entity)'", field: "entity") }
        let ast = try Parser.parse(text, field: field, limits: limits)
        var checker = Checker(schema: schema, entity: entity, variables: variables, limits: limits, field: field)
        checker.aliases = aliases
        checker.trace = trace
        root = try checker.check(ast)
        self.schema = schema
        self.entity = entity
        self.text = text
    }

    /// True if `object` (of this predicate's entity or a sub-entity) satisfies the predicate.
    /// `resolve` returns the current state of related objects (nil: it does not exist).
    public func evaluate(_ object: ObjectSnapshot, resolve: (ObjectID) -> ObjectSnapshot?) throws -> Bool {
        try withoutActuallyEscaping(resolve) { try Evaluator(resolve: $0).test(root, object, outer: nil) }
    }
}

struct Evaluator {
    let resolve: (ObjectID) -> ObjectSnapshot?

    func test(_ p: Pred, _ o: ObjectSnapshot, outer: ObjectSnapshot?) throws -> Bool {
        switch p {
        case .constant(let b): return b
        case .and(let l):
            for x in l where try !test(x, o, outer: outer) { return false }
            return true
        case .or(let l):
            for x in l where try test(x, o, outer: outer) { return true }
            return false
        case .not(let x): return try !test(x, o, outer: outer)
        case .quantified(let q, let coll, let inner):
            let elements = collection(coll, of: o)
            switch q {
            case .anyOf: for e in elements where try test(inner, e, outer: o) { return true }; return false
            case .allOf: for e in elements where try !test(inner, e, outer: o) { return false }; return true
            case .noneOf: for e in elements where try test(inner, e, outer: o) { return false }; return true
            }
        case .compare(let c): return try compare(c, o, outer: outer)
        }
    }

    func compare(_ c: Comparison, _ o: ObjectSnapshot, outer: ObjectSnapshot?) throws -> Bool {
        var l = try value(c.lhs, o, outer: outer)
        if case .regex(let r, _, let maxSteps)? = c.pattern {
            guard case .text(let s) = l else { return false }
            return try r.matches(s, maxSteps: maxSteps)  // the program folds the text itself
        }
        if !c.fold.isEmpty, case .text(let s) = l { l = .text(TextFold.fold(s, c.fold)) }
        if case .wildcard(let w)? = c.pattern {
            guard case .text(let s) = l else { return false }
            return w.matches(s)
        }
        func rhs() throws -> Scalar {
            var r = try value(c.rhs, o, outer: outer)
            if !c.fold.isEmpty, case .text(let s) = r, !c.rhs.isConstant { r = .text(TextFold.fold(s, c.fold)) }
            return r
        }
        switch c.op {
        case .eq, .ne:
            let r = try rhs()
            let equal = (l.isNull && r.isNull) || Scalar.compare(l, r) == 0
            return c.op == .eq ? equal : !equal
        case .lt: return Scalar.compare(l, try rhs()).map { $0 < 0 } ?? false
        case .le: return Scalar.compare(l, try rhs()).map { $0 <= 0 } ?? false
        case .gt: return Scalar.compare(l, try rhs()).map { $0 > 0 } ?? false
        case .ge: return Scalar.compare(l, try rhs()).map { $0 >= 0 } ?? false
        case .between:
            let r = try list(c.rhs, o)
            guard r.count == 2, let a = Scalar.compare(l, r[0]), let b = Scalar.compare(l, r[1]) else { return false }
            return a >= 0 && b <= 0
        case .inList:
            if l.isNull { return false }
            return try list(c.rhs, o).contains { Scalar.compare(l, $0) == 0 }
        default: return false
        }
    }

    func list(_ v: Value, _ o: ObjectSnapshot) throws -> [Scalar] {
        switch v {
        case .list(let l): return l
        case .objects(let ids, let family): return ids.map { Evaluator.objectKey($0, storeID: o.id.storeID, family: family) }
        default: return []
        }
    }

    /// An object ID constant as the pk it matches in this store (0, which no object has, otherwise).
    static func objectKey(_ id: ObjectID, storeID: UUID, family: [String]) -> Scalar {
        guard id.storeID == storeID, family.isEmpty || family.contains(id.entity) else { return .int(0) }
        return .int(id.pk)
    }

    func value(_ v: Value, _ o: ObjectSnapshot, outer: ObjectSnapshot?) throws -> Scalar {
        switch v {
        case .constant(let s): return s
        case .list: return .null
        case .objects(let ids, let family): return ids.first.map { Evaluator.objectKey($0, storeID: o.id.storeID, family: family) } ?? .null
        case .path(let p): return path(p, o)
        case .outerPath(let p): return outer.map { path(p, $0) } ?? .null
        case .count(let c): return .int(Int64(collection(c, of: o).count))
        case .aggregate(let f, let c, let el):
            let vals = collection(c, of: o).map { path(el, $0) }.filter { !$0.isNull }
            switch f {
            case .min: return vals.min { Scalar.order($0, $1) < 0 } ?? .null
            case .max: return vals.max { Scalar.order($0, $1) < 0 } ?? .null
            case .sum:
                if vals.allSatisfy({ if case .int = $0 { return true }; return false }) {
                    var s: Int64 = 0
                    for case .int(let i) in vals { s = s &+ i }
                    return .int(s)
                }
                return .real(vals.reduce(0.0) { $0 + Evaluator.double($1) })
            case .avg:
                if vals.isEmpty { return .null }
                return .real(vals.reduce(0.0) { $0 + Evaluator.double($1) } / Double(vals.count))
            }
        case .alias(_, let n): throw QueryError(.unsupported, "'\(n)' is an aggregate of a group and cannot be evaluated for one object", field: "havingPredicate")
        }
    }

    static func double(_ s: Scalar) -> Double {
        switch s { case .int(let i): Double(i); case .real(let d): d; default: 0 }
    }

    /// The value at a scalar path, in the form SQL compares (stored form; decimals as reals).
    func path(_ p: ScalarPath, _ o: ObjectSnapshot) -> Scalar {
        var cur = o
        for h in p.hops {
            guard let id = cur.relationships[h.relationship]?.first, let next = resolve(id) else { return .null }
            cur = next
        }
        switch p.terminal {
        case .selfObject: return .int(cur.id.pk)
        case .relationship(let r, _): return cur.relationships[r]?.first.map { .int($0.pk) } ?? .null
        case .attribute(let n, let t):
            let v = t.storedForm(cur.values[n] ?? .null)
            if t == .decimal, case .string(let s) = v { return Double(s).map { .real($0) } ?? .null }
            return Scalar(stored: v)
        }
    }

    /// The elements reached through a collection path (duplicates kept, as SQL joins keep them).
    func collection(_ c: CollectionPath, of o: ObjectSnapshot) -> [ObjectSnapshot] {
        var cur = [o]
        for h in c.hops {
            var next: [ObjectSnapshot] = []
            for x in cur {
                for id in x.relationships[h.relationship] ?? [] { if let y = resolve(id) { next.append(y) } }
            }
            cur = next
        }
        return cur
    }
}

extension Value {
    var isConstant: Bool { switch self { case .constant, .list, .objects: true; default: false } }
}
