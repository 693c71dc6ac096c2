// Values as SQLite compares them, Unicode folding for [c]/[d], and the wildcard patterns behind
// BEGINSWITH / ENDSWITH / CONTAINS / LIKE. The SQL side (registered functions, GLOB) and the
// in-memory evaluator use these same definitions, which is what makes them agree.
import Foundation
import UbiquityStorage

/// A value in SQLite's storage classes, compared the way SQLite compares them: NULL, then
/// numbers (integers and reals compared numerically), then text (UTF-8 bytes, i.e. the BINARY
/// collation), then blobs (bytes). Never Swift's String comparison, which treats canonically
/// equivalent strings as equal where SQLite does not.
enum Scalar: Sendable, Hashable {
    case null
    case int(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// From an untyped stored form (`AttributeType.storedForm`, `ReadContext.rows`).
    init(stored v: StorageValue) {
        switch v {
        case .null: self = .null
        case .int(let i): self = .int(i)
        case .bool(let b): self = .int(b ? 1 : 0)
        case .double(let d), .date(let d): self = .real(d)
        case .string(let s), .decimal(let s), .uri(let s): self = .text(s)
        case .uuid(let u): self = .text(u.uuidString.lowercased())
        case .binary(let d): self = .blob(Array(d))
        }
    }

    var storageValue: StorageValue {
        switch self {
        case .null: .null
        case .int(let i): .int(i)
        case .real(let d): .double(d)
        case .text(let s): .string(s)
        case .blob(let b): .binary(Data(b))
        }
    }

    var isNull: Bool { if case .null = self { return true }; return false }

    private var classRank: Int {
        switch self { case .null: 0; case .int, .real: 1; case .text: 2; case .blob: 3 }
    }

    /// SQLite's ordering (ORDER BY, and comparison operators between values of one class).
    static func order(_ a: Scalar, _ b: Scalar) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.int(let x), .int(let y)): return x < y ? -1 : x > y ? 1 : 0
        case (.int(let x), .real(let y)): return compare(x, y)
        case (.real(let x), .int(let y)): return -compare(y, x)
        case (.real(let x), .real(let y)): return x < y ? -1 : x > y ? 1 : 0
        case (.text(let x), .text(let y)): return bytes(x.utf8, y.utf8)
        case (.blob(let x), .blob(let y)): return bytes(x, y)
        default: return a.classRank < b.classRank ? -1 : a.classRank > b.classRank ? 1 : 0
        }
    }

    /// Comparison operator semantics: nil when either side is NULL (the comparison is false).
    static func compare(_ a: Scalar, _ b: Scalar) -> Int? {
        if a.isNull || b.isNull { return nil }
        return order(a, b)
    }

    /// Integer against real, exactly (as SQLite does), without rounding the integer first.
    private static func compare(_ i: Int64, _ d: Double) -> Int {
        if d.isNaN { return 1 }
        if d >= 9.3e18 { return -1 }
        if d <= -9.3e18 { return 1 }
        let t = d.rounded(.down)
        let ti = Int64(t)
        if i < ti { return -1 }
        if i > ti { return 1 }
        return t < d ? -1 : 0
    }

    private static func bytes<A: Sequence, B: Sequence>(_ a: A, _ b: B) -> Int where A.Element == UInt8, B.Element == UInt8 {
        var ia = a.makeIterator(), ib = b.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }
}

/// Unicode folding for [c] / [d] and case-insensitive sorts (docs/query.md, "How [c] and [d] work").
enum TextFold {
    /// - [d]: canonical decomposition (NFD), then every nonspacing mark (general category Mn) is
    ///   removed: "é" and "e\u{301}" both become "e".
    /// - [c]: full case folding by mapping each scalar that changes under case folding to the
    ///   lowercase of its full uppercase mapping: "ß" → "ss", "ﬁ" → "fi", "Σ"/"σ"/"ς" → "σ",
    ///   "K" (Kelvin) → "k". This equals Unicode's CaseFolding.txt full folding except for a few
    ///   scripts whose folding targets uppercase (Cherokee), which still compare consistently.
    /// - The result is put in NFC so canonically equivalent inputs fold to the same bytes.
    static func fold(_ s: String, _ options: FoldOptions) -> String {
        if options.isEmpty { return s }
        var scalars = String.UnicodeScalarView()
        let source = options.contains(.diacriticInsensitive) ? s.decomposedStringWithCanonicalMapping : s
        for u in source.unicodeScalars {
            if options.contains(.diacriticInsensitive) && u.properties.generalCategory == .nonspacingMark { continue }
            if options.contains(.caseInsensitive) && u.properties.changesWhenCaseFolded {
                for x in u.properties.uppercaseMapping.unicodeScalars { scalars.append(contentsOf: x.properties.lowercaseMapping.unicodeScalars) }
            } else {
                scalars.append(u)
            }
        }
        // ASCII-only results are already NFC; skip the (costly) normalization for them
        let out = String(scalars)
        return out.utf8.allSatisfy { $0 < 0x80 } ? out : out.precomposedStringWithCanonicalMapping
    }
}

/// A BEGINSWITH / ENDSWITH / CONTAINS / LIKE pattern: literal characters, `?` (exactly one
/// character) and `*` (any run of characters). Compiled to SQLite GLOB (with `*`, `?` and `[`
/// of the literal text escaped as `[*]`, `[?]`, `[[]`) and matched in memory over Unicode
/// scalars, exactly as GLOB matches (one `?` = one code point).
struct WildcardPattern: Sendable, Hashable {
    enum Piece: Sendable, Hashable { case literal(Unicode.Scalar), one, any }
    var pieces: [Piece]

    static func beginsWith(_ s: String) -> WildcardPattern { WildcardPattern(pieces: s.unicodeScalars.map { .literal($0) } + [.any]) }
    static func endsWith(_ s: String) -> WildcardPattern { WildcardPattern(pieces: [.any] + s.unicodeScalars.map { .literal($0) }) }
    static func contains(_ s: String) -> WildcardPattern { WildcardPattern(pieces: [.any] + s.unicodeScalars.map { .literal($0) } + [.any]) }

    /// NSPredicate LIKE: `*` and `?` are wildcards; `\*`, `\?` and `\\` stand for themselves.
    static func like(_ s: String) -> WildcardPattern {
        var out: [Piece] = []
        var it = s.unicodeScalars.makeIterator()
        while let u = it.next() {
            switch u {
            case "*": out.append(.any)
            case "?": out.append(.one)
            case "\\": out.append(.literal(it.next() ?? "\\"))
            default: out.append(.literal(u))
            }
        }
        return WildcardPattern(pieces: out)
    }

    var glob: String {
        var s = String.UnicodeScalarView()
        for p in pieces {
            switch p {
            case .any: s.append("*")
            case .one: s.append("?")
            case .literal(let u):
                if u == "*" || u == "?" || u == "[" { s.append("["); s.append(u); s.append("]") } else { s.append(u) }
            }
        }
        return String(s)
    }

    /// Greedy matching with backtracking to the last `*` (linear in practice, O(n·m) at worst).
    func matches(_ text: String) -> Bool {
        let t = Array(text.unicodeScalars)
        var ti = 0, pi = 0
        var starP = -1, starT = 0
        while ti < t.count {
            if pi < pieces.count {
                switch pieces[pi] {
                case .any: starP = pi; starT = ti; pi += 1; continue
                case .one: ti += 1; pi += 1; continue
                case .literal(let u) where u == t[ti]: ti += 1; pi += 1; continue
                default: break
                }
            }
            if starP < 0 { return false }
            starT += 1; ti = starT; pi = starP + 1
        }
        while pi < pieces.count, pieces[pi] == .any { pi += 1 }
        return pi == pieces.count
    }
}
