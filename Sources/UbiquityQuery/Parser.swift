// Parser of the NSPredicate format language into an untyped syntax tree (docs/query.md, "Grammar").
// Recursive descent; every recursion is counted against QueryLimits.maxDepth before it happens,
// and every node against maxNodes, so no input can exhaust the stack or memory.
import Foundation
import UbiquityStorage
import UbiquityLock

enum Quantifier: String, Sendable { case anyOf = "ANY", allOf = "ALL", noneOf = "NONE" }

enum CompareOp: String, Sendable {
    case eq = "==", ne = "!=", lt = "<", le = "<=", gt = ">", ge = ">="
    case between = "BETWEEN", inList = "IN", contains = "CONTAINS", beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", like = "LIKE", matches = "MATCHES"

    var isOrdering: Bool { self == .lt || self == .le || self == .gt || self == .ge }
    var isStringOperator: Bool { self == .contains || self == .beginsWith || self == .endsWith || self == .like || self == .matches }
    /// The operator with its operands swapped (`5 < age` is `age > 5`).
    var flipped: CompareOp? {
        switch self {
        case .eq, .ne: self
        case .lt: .gt
        case .le: .ge
        case .gt: .lt
        case .ge: .le
        default: nil
        }
    }
}

/// [c] and [d]: bit 1 = case-insensitive, bit 2 = diacritic-insensitive.
struct FoldOptions: OptionSet, Sendable, Hashable {
    let rawValue: Int
    static let caseInsensitive = FoldOptions(rawValue: 1)
    static let diacriticInsensitive = FoldOptions(rawValue: 2)
    var suffix: String { isEmpty ? "" : "[" + (contains(.caseInsensitive) ? "c" : "") + (contains(.diacriticInsensitive) ? "d" : "") + "]" }
}

enum PathPart: Sendable, Equatable {
    case name(String)
    case function(String)
    var text: String { switch self { case .name(let n): n; case .function(let f): "@" + f } }
}

indirect enum ExprNode: Sendable {
    case keyPath([PathPart], column: Int)
    case selfRef([PathPart], column: Int)
    case literal(StorageValue, column: Int)
    case variable(String, column: Int)
    case list([ExprNode], column: Int)

    var column: Int {
        switch self {
        case .keyPath(_, let c), .selfRef(_, let c), .literal(_, let c), .variable(_, let c), .list(_, let c): c
        }
    }

    var description: String {
        switch self {
        case .keyPath(let p, _): p.map(\.text).joined(separator: ".")
        case .selfRef(let p, _): (["SELF"] + p.map(\.text)).joined(separator: ".")
        case .literal(let v, _): ExprNode.literalText(v)
        case .variable(let n, _): "$" + n
        case .list(let l, _): "{" + l.map(\.description).joined(separator: ", ") + "}"
        }
    }

    static func literalText(_ v: StorageValue) -> String {
        switch v {
        case .null: "nil"
        case .bool(let b): b ? "YES" : "NO"
        case .int(let i): String(i)
        case .double(let d): String(d)
        case .string(let s):
            "\"" + s.unicodeScalars.map { u -> String in
                switch u {
                case "\"": "\\\""
                case "\\": "\\\\"
                case "\n": "\\n"
                case "\t": "\\t"
                default: u.value < 0x20 ? String(format: "\\u%04X", u.value) : String(u)
                }
            }.joined() + "\""
        default: v.description
        }
    }
}

struct ComparisonNode: Sendable {
    var quantifier: Quantifier?
    var lhs: ExprNode
    var op: CompareOp
    var options: FoldOptions
    var rhs: ExprNode
    var column: Int
    var opColumn: Int
}

indirect enum PredicateNode: Sendable {
    case constant(Bool)
    case and([PredicateNode])
    case or([PredicateNode])
    case not(PredicateNode)
    case comparison(ComparisonNode)

    /// Canonical text (golden tests, logs): fully parenthesized, keywords upper-case.
    var description: String {
        switch self {
        case .constant(let b): b ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .and(let l): "(" + l.map(\.description).joined(separator: " AND ") + ")"
        case .or(let l): "(" + l.map(\.description).joined(separator: " OR ") + ")"
        case .not(let p): "NOT " + p.description
        case .comparison(let c):
            (c.quantifier.map { $0.rawValue + " " } ?? "") + c.lhs.description + " " + c.op.rawValue + c.options.suffix + " " + c.rhs.description
        }
    }
}

struct Parser {
    let tokens: [Token]
    let field: String
    let limits: QueryLimits
    var pos = 0
    var depth = 0
    var nodes = 0

    /// Recently parsed predicates (the same predicate text usually comes back with other
    /// $variable values): the syntax tree is pure, so it is shared, keyed by text and limits.
    static let cache = ParseCache()

    static func parse(_ text: String, field: String = "predicate", limits: QueryLimits) throws -> PredicateNode {
        let key = ParseCache.Key(text: text, field: field, length: limits.maxPredicateLength, depth: limits.maxDepth, nodes: limits.maxNodes, list: limits.maxInListSize)
        if let hit = cache.get(key) { return hit }
        let node = try uncachedParse(text, field: field, limits: limits)
        cache.put(key, node)
        return node
    }

    static func uncachedParse(_ text: String, field: String, limits: QueryLimits) throws -> PredicateNode {
        if text.count > limits.maxPredicateLength {
            throw QueryError(.limitExceeded, "predicate is \(text.count) characters long; the limit is \(limits.maxPredicateLength)", field: field)
        }
        var p = Parser(tokens: try Lexer.tokenize(text, field: field), field: field, limits: limits)
        if case .end = p.peek.kind { throw p.error("empty predicate: write a comparison, or TRUEPREDICATE for every object", p.peek) }
        let r = try p.parseOr()
        if case .end = p.peek.kind { return r }
        throw p.error("unexpected \(p.describe(p.peek)) after a complete predicate (missing AND or OR?)", p.peek)
    }

    var peek: Token { tokens[pos] }
    mutating func next() -> Token { let t = tokens[pos]; if pos < tokens.count - 1 { pos += 1 }; return t }

    func describe(_ t: Token) -> String {
        if case .end = t.kind { return "end of predicate" }
        return "'\(t.text)'"
    }

    func error(_ m: String, _ t: Token, _ reason: QueryError.Reason = .syntax) -> QueryError {
        QueryError(reason, "\(m) at column \(t.column)", column: t.column, field: field)
    }

    mutating func count(_ t: Token) throws {
        nodes += 1
        if nodes > limits.maxNodes { throw error("predicate has more than \(limits.maxNodes) nodes", t, .limitExceeded) }
    }

    mutating func enter(_ t: Token) throws {
        depth += 1
        if depth > limits.maxDepth { throw error("predicate nests deeper than \(limits.maxDepth) levels", t, .limitExceeded) }
    }

    func isKeyword(_ k: String) -> Bool { if case .keyword(k) = peek.kind { return true }; return false }
    func isSymbol(_ s: String) -> Bool { if case .symbol(s) = peek.kind { return true }; return false }

    mutating func parseOr() throws -> PredicateNode {
        var items = [try parseAnd()]
        while isKeyword("OR") || isSymbol("||") {
            try count(next())
            items.append(try parseAnd())
        }
        return items.count == 1 ? items[0] : .or(items)
    }

    mutating func parseAnd() throws -> PredicateNode {
        var items = [try parseUnary()]
        while isKeyword("AND") || isSymbol("&&") {
            try count(next())
            items.append(try parseUnary())
        }
        return items.count == 1 ? items[0] : .and(items)
    }

    mutating func parseUnary() throws -> PredicateNode {
        let t = peek
        if isKeyword("NOT") || isSymbol("!") {
            _ = next()
            try enter(t); try count(t)
            defer { depth -= 1 }
            if case .end = peek.kind { throw error("expected a predicate after \(describe(t))", peek) }
            return .not(try parseUnary())
        }
        if isSymbol("(") {
            _ = next()
            try enter(t)
            defer { depth -= 1 }
            if isSymbol(")") { throw error("empty parentheses: expected a predicate", peek) }
            let inner = try parseOr()
            guard isSymbol(")") else { throw error("expected ')' to close the '(' at column \(t.column), found \(describe(peek))", peek) }
            _ = next()
            return inner
        }
        if isKeyword("TRUEPREDICATE") { try count(next()); return .constant(true) }
        if isKeyword("FALSEPREDICATE") { try count(next()); return .constant(false) }
        return try parseComparison()
    }

    mutating func parseComparison() throws -> PredicateNode {
        let start = peek
        var quantifier: Quantifier?
        if case .keyword(let k) = peek.kind, ["ANY", "SOME", "ALL", "NONE"].contains(k) {
            quantifier = k == "ALL" ? .allOf : k == "NONE" ? .noneOf : .anyOf
            _ = next()
            try enter(start)
        }
        defer { if quantifier != nil { depth -= 1 } }
        if case .end = peek.kind {
            let after = pos > 0 ? " after '\(tokens[pos - 1].text)'" : ""
            throw error("expected a comparison\(after)", peek)
        }
        if quantifier == nil, case .keyword(let k) = peek.kind, ["AND", "OR"].contains(k) {
            throw error("expected a comparison before '\(peek.text)'", peek)
        }
        let lhs = try parseValue(after: quantifier == nil ? nil : start)
        let opTok = peek
        let op: CompareOp
        switch opTok.kind {
        case .symbol(let s) where ["==", "!=", "<", "<=", ">", ">="].contains(s): op = CompareOp(rawValue: s)!
        case .keyword(let k) where ["IN", "BETWEEN", "CONTAINS", "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES"].contains(k): op = CompareOp(rawValue: k)!
        case .symbol(let s) where ["+", "-", "*", "/"].contains(s):
            throw error("arithmetic ('\(s)') is not supported", opTok, .unsupported)
        case .symbol("["): throw error("indexing with [ ] is not supported", opTok, .unsupported)
        case .end: throw error("expected a comparison operator (==, !=, <, >, IN, CONTAINS, …) after '\(lhs.description)'", opTok)
        default: throw error("expected a comparison operator (==, !=, <, >, IN, CONTAINS, …) after '\(lhs.description)', found \(describe(opTok))", opTok)
        }
        _ = next()
        try count(opTok)
        var options: FoldOptions = []
        if isSymbol("[") {
            let open = next()
            guard case .identifier(let letters) = peek.kind else { throw error("expected c, d or cd inside [ ] after \(op.rawValue)", peek) }
            for ch in letters {
                switch ch {
                case "c": options.insert(.caseInsensitive)
                case "d": options.insert(.diacriticInsensitive)
                default: throw error("unknown comparison option '\(ch)' (use [c], [d] or [cd])", peek)
                }
            }
            _ = next()
            guard isSymbol("]") else { throw error("expected ']' to close the '[' at column \(open.column)", peek) }
            _ = next()
        }
        if case .end = peek.kind { throw error("expected a value after '\(opTok.text)'", peek) }
        let rhs = try parseValue(after: opTok)
        return .comparison(ComparisonNode(quantifier: quantifier, lhs: lhs, op: op, options: options, rhs: rhs, column: start.column, opColumn: opTok.column))
    }

    /// A value: literal, $variable, {list}, key path, SELF.
    mutating func parseValue(after: Token?) throws -> ExprNode {
        let t = peek
        try count(t)
        let afterText = after.map { " after '\($0.text)'" } ?? ""
        switch t.kind {
        case .integer(let i): _ = next(); return .literal(.int(i), column: t.column)
        case .real(let d): _ = next(); return .literal(.double(d), column: t.column)
        case .string(let s): _ = next(); return .literal(.string(s), column: t.column)
        case .variable(let v): _ = next(); return .variable(v, column: t.column)
        case .symbol("-"):
            _ = next()
            switch peek.kind {
            case .integer(let i): _ = next(); return .literal(.int(-i), column: t.column)
            case .real(let d): _ = next(); return .literal(.double(-d), column: t.column)
            default: throw error("'-' must be followed by a number (arithmetic is not supported)", peek, .unsupported)
            }
        case .symbol("{"):
            _ = next()
            try enter(t)
            defer { depth -= 1 }
            var items: [ExprNode] = []
            if isSymbol("}") { _ = next(); return .list([], column: t.column) }
            while true {
                if case .end = peek.kind { throw error("expected a value or '}' to close the '{' at column \(t.column)", peek) }
                let v = try parseValue(after: nil)
                if case .list = v { throw error("lists cannot be nested", tokens[max(0, pos - 1)], .unsupported) }
                items.append(v)
                if items.count > limits.maxInListSize { throw error("list has more than \(limits.maxInListSize) values", t, .limitExceeded) }
                if isSymbol(",") { _ = next(); continue }
                if isSymbol("}") { _ = next(); break }
                throw error("expected ',' or '}' in the list opened at column \(t.column), found \(describe(peek))", peek)
            }
            return .list(items, column: t.column)
        case .keyword(let k):
            switch k {
            case "TRUE", "YES": _ = next(); return .literal(.bool(true), column: t.column)
            case "FALSE", "NO": _ = next(); return .literal(.bool(false), column: t.column)
            case "NIL", "NULL": _ = next(); return .literal(.null, column: t.column)
            case "SELF":
                _ = next()
                return .selfRef(try parsePathTail(), column: t.column)
            case "SUBQUERY", "FUNCTION", "CAST", "FIRST", "LAST", "SIZE":
                throw error("\(k) is not supported", t, .unsupported)
            default:
                throw error("expected a value\(afterText), found keyword \(k) (write #\(t.text) for a property with that name)", t)
            }
        case .identifier(let n):
            _ = next()
            return .keyPath([.name(n)] + (try parsePathTail()), column: t.column)
        case .function(let f):
            throw error("'@\(f)' must follow a to-many key path (e.g. items.@\(f))", t)
        case .end:
            throw error("expected a value\(afterText)", t)
        default:
            throw error("expected a value\(afterText), found \(describe(t))", t)
        }
    }

    mutating func parsePathTail() throws -> [PathPart] {
        var parts: [PathPart] = []
        while isSymbol(".") {
            _ = next()
            let t = next()
            try count(t)
            switch t.kind {
            case .identifier(let n): parts.append(.name(n))
            case .keyword: parts.append(.name(t.text))
            case .function(let f): parts.append(.function(f))
            default: throw error("expected a property name after '.', found \(describe(t))", t)
            }
        }
        if isSymbol("[") { throw error("indexing with [ ] is not supported", peek, .unsupported) }
        return parts
    }
}

/// A small bounded cache of syntax trees (at most 256, cleared when full).
final class ParseCache: Sendable {
    struct Key: Hashable { var text: String; var field: String; var length: Int; var depth: Int; var nodes: Int; var list: Int }
    private let entries = Lock<[Key: PredicateNode]>([:])
    func get(_ k: Key) -> PredicateNode? { entries.withLock { $0[k] } }
    func put(_ k: Key, _ v: PredicateNode) {
        guard k.text.utf8.count <= 4096 else { return }
        entries.withLock { e in
            if e.count >= 256 { e.removeAll(keepingCapacity: true) }
            e[k] = v
        }
    }
}

extension Predicate {
    /// Parses without a model and returns the canonical, fully parenthesized form (golden tests,
    /// showing a client how its predicate was read). Syntax errors and limits only.
    public static func canonicalForm(_ text: String, limits: QueryLimits = QueryLimits()) throws -> String {
        try Parser.parse(text, limits: limits).description
    }
}
