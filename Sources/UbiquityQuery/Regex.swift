// MATCHES: a regular-expression engine with a bound on its cost. Patterns compile to a small
// instruction program run as a Pike VM (Thompson NFA simulation): the text is read once and
// each character visits each instruction at most once, so the work is at most
// text length × program size — no backtracking, no catastrophic patterns. The program size and
// the steps of one evaluation are bounded by QueryLimits (maxRegexProgramSize, maxRegexSteps).
// The same program runs inside SQLite (the registered `ubq_regex` function) and in memory.
import Foundation

struct RegexError: Error, CustomStringConvertible {
    var message: String
    /// 0-based character offset in the pattern, if known.
    var offset: Int?
    var isLimit = false
    var description: String { (isLimit ? "ubq-limit: " : "ubq-regex: ") + message }
}

struct CharClass: Sendable, Hashable {
    enum Builtin: Sendable, Hashable { case digit, word, space, notDigit, notWord, notSpace }
    var negated = false
    var ranges: [ClosedRange<UInt32>] = []
    var builtins: [Builtin] = []

    func containsExactly(_ u: Unicode.Scalar) -> Bool {
        for r in ranges where r.contains(u.value) { return true }
        for b in builtins {
            switch b {
            case .digit: if CharClass.isDigit(u) { return true }
            case .notDigit: if !CharClass.isDigit(u) { return true }
            case .word: if CharClass.isWord(u) { return true }
            case .notWord: if !CharClass.isWord(u) { return true }
            case .space: if u.properties.isWhitespace { return true }
            case .notSpace: if !u.properties.isWhitespace { return true }
            }
        }
        return false
    }

    /// With case folding, a scalar also matches through its simple upper- and lowercase forms
    /// (the text was folded, so `[A-Z]` must still match "a").
    func matches(_ u: Unicode.Scalar, folded: Bool) -> Bool {
        var hit = containsExactly(u)
        if !hit && folded {
            for m in [u.properties.uppercaseMapping, u.properties.lowercaseMapping] {
                let s = m.unicodeScalars
                if s.count == 1, containsExactly(s.first!) { hit = true; break }
            }
        }
        return hit != negated
    }

    static func isDigit(_ u: Unicode.Scalar) -> Bool { u.properties.numericType == .decimal }
    static func isWord(_ u: Unicode.Scalar) -> Bool {
        u == "_" || u.properties.isAlphabetic || u.properties.numericType == .decimal || u.properties.generalCategory == .nonspacingMark
    }
}

struct RegexProgram: Sendable {
    enum Inst: Sendable, Hashable {
        case char(Unicode.Scalar)
        case set(CharClass)
        case anyButNewline
        case split(Int, Int)
        case jump(Int)
        case assertStart
        case assertEnd
        case match
    }
    let insts: [Inst]
    let options: FoldOptions

    private indirect enum Node {
        case empty
        case literal(Unicode.Scalar)
        case set(CharClass)
        case dot
        case start, end
        case concat([Node])
        case alt([Node])
        case rep(Node, Int, Int?)
    }

    /// Compiles `pattern` (ICU-style syntax subset, see docs/query.md); literal characters are
    /// folded with `options` like the text will be.
    static func compile(_ pattern: String, options: FoldOptions, maxLength: Int, maxProgram: Int) throws -> RegexProgram {
        if pattern.count > maxLength {
            throw RegexError(message: "MATCHES pattern is \(pattern.count) characters long; the limit is \(maxLength)", isLimit: true)
        }
        var p = PatternParser(chars: Array(pattern.unicodeScalars), options: options)
        let node = try p.parseAlt()
        if p.i < p.chars.count { throw RegexError(message: "unbalanced ')' in MATCHES pattern", offset: p.i) }
        var out: [Inst] = []
        try emit(node, &out, maxProgram)
        out.append(.match)
        return RegexProgram(insts: out, options: options)
    }

    private static func emit(_ n: Node, _ out: inout [Inst], _ max: Int) throws {
        if out.count > max { throw RegexError(message: "MATCHES pattern compiles to more than \(max) instructions (large {n,m} repetitions?)", isLimit: true) }
        switch n {
        case .empty: break
        case .literal(let u): out.append(.char(u))
        case .set(let c): out.append(.set(c))
        case .dot: out.append(.anyButNewline)
        case .start: out.append(.assertStart)
        case .end: out.append(.assertEnd)
        case .concat(let l): for x in l { try emit(x, &out, max) }
        case .alt(let l):
            var jumps: [Int] = []
            for (k, x) in l.enumerated() {
                if k < l.count - 1 {
                    let split = out.count
                    out.append(.split(split + 1, 0))
                    try emit(x, &out, max)
                    jumps.append(out.count)
                    out.append(.jump(0))
                    out[split] = .split(split + 1, out.count)
                } else {
                    try emit(x, &out, max)
                }
            }
            for j in jumps { out[j] = .jump(out.count) }
        case .rep(let x, let lo, let hi):
            for _ in 0..<lo { try emit(x, &out, max) }
            if let hi {
                var splits: [Int] = []
                for _ in lo..<hi {
                    splits.append(out.count)
                    out.append(.split(out.count + 1, 0))
                    try emit(x, &out, max)
                }
                for s in splits { out[s] = .split(s + 1, out.count) }
            } else {
                let loop = out.count
                out.append(.split(loop + 1, 0))
                try emit(x, &out, max)
                out.append(.jump(loop))
                out[loop] = .split(loop + 1, out.count)
            }
        }
    }

    /// Whole-string match (NSPredicate MATCHES semantics). Throws a limit error past `maxSteps`.
    func matches(_ text: String, maxSteps: Int) throws -> Bool {
        let t = Array(TextFold.fold(text, options).unicodeScalars)
        let folded = options.contains(.caseInsensitive)
        var steps = 0
        var current: [Int] = [], nextList: [Int] = []
        var onList = [Int](repeating: -1, count: insts.count)  // generation stamp per instruction
        var stack: [Int] = []
        func add(_ pc0: Int, _ pos: Int, _ list: inout [Int], _ stamp: Int) throws {
            stack.append(pc0)
            while let pc = stack.popLast() {
                if onList[pc] == stamp { continue }
                onList[pc] = stamp
                steps += 1
                if steps > maxSteps { throw RegexError(message: "MATCHES needed more than \(maxSteps) steps on one value", isLimit: true) }
                switch insts[pc] {
                case .jump(let x): stack.append(x)
                case .split(let x, let y): stack.append(y); stack.append(x)
                case .assertStart: if pos == 0 { stack.append(pc + 1) }
                case .assertEnd: if pos == t.count { stack.append(pc + 1) }
                default: list.append(pc)
                }
            }
        }
        try add(0, 0, &current, 0)
        for pos in 0...t.count {
            nextList.removeAll(keepingCapacity: true)
            for pc in current {
                steps += 1
                if steps > maxSteps { throw RegexError(message: "MATCHES needed more than \(maxSteps) steps on one value", isLimit: true) }
                switch insts[pc] {
                case .match: if pos == t.count { return true }
                case .char(let u): if pos < t.count && t[pos] == u { try add(pc + 1, pos + 1, &nextList, pos + 1) }
                case .set(let c): if pos < t.count && c.matches(t[pos], folded: folded) { try add(pc + 1, pos + 1, &nextList, pos + 1) }
                case .anyButNewline: if pos < t.count && t[pos] != "\n" && t[pos] != "\r" { try add(pc + 1, pos + 1, &nextList, pos + 1) }
                default: break
                }
            }
            if nextList.isEmpty { return false }
            swap(&current, &nextList)
        }
        return false
    }

    private struct PatternParser {
        let chars: [Unicode.Scalar]
        let options: FoldOptions
        var i = 0
        var depth = 0

        func fail(_ m: String, _ at: Int? = nil) -> RegexError { RegexError(message: "\(m) in MATCHES pattern at character \((at ?? i) + 1)", offset: at ?? i) }

        mutating func parseAlt() throws -> Node {
            var alts = [try parseConcat()]
            while i < chars.count, chars[i] == "|" { i += 1; alts.append(try parseConcat()) }
            return alts.count == 1 ? alts[0] : .alt(alts)
        }

        mutating func parseConcat() throws -> Node {
            var items: [Node] = []
            while i < chars.count, chars[i] != "|", chars[i] != ")" {
                var atom = try parseAtom()
                while i < chars.count {
                    let c = chars[i]
                    var lo = 0, hi: Int? = nil
                    if c == "*" { i += 1 } else if c == "+" { lo = 1; i += 1 } else if c == "?" { hi = 1; i += 1 } else if c == "{" {
                        guard let (a, b) = try parseCount() else { break }
                        lo = a; hi = b
                    } else { break }
                    if i < chars.count, chars[i] == "?" { i += 1 }  // lazy: same answer for a whole-string match
                    else if i < chars.count, chars[i] == "+" { throw fail("possessive quantifiers are not supported") }
                    atom = .rep(atom, lo, hi)
                }
                items.append(atom)
            }
            return items.count == 1 ? items[0] : .concat(items)
        }

        /// `{n}`, `{n,}`, `{n,m}`; nil (and `{` taken literally) if it is not a count.
        mutating func parseCount() throws -> (Int, Int?)? {
            var j = i + 1
            func num() -> Int? {
                let s = j
                while j < chars.count, ("0"..."9").contains(chars[j]) { j += 1 }
                return j > s ? Int(String(String.UnicodeScalarView(chars[s..<j]))) : nil
            }
            guard let a = num() else { return nil }
            var b: Int? = a
            if j < chars.count, chars[j] == "," { j += 1; b = num() }
            guard j < chars.count, chars[j] == "}" else { return nil }
            if let b, b < a { throw fail("{\(a),\(b)} has its bounds reversed") }
            if a > 1000 || (b ?? 0) > 1000 { throw fail("repetition counts above 1000 are not supported") }
            i = j + 1
            return (a, b)
        }

        mutating func parseAtom() throws -> Node {
            let c = chars[i]
            switch c {
            case "(":
                let open = i
                i += 1
                depth += 1
                if depth > 64 { throw fail("groups nest deeper than 64 levels") }
                if i < chars.count, chars[i] == "?" {
                    guard i + 1 < chars.count, chars[i + 1] == ":" else { throw fail("lookaround and other (? groups are not supported") }
                    i += 2
                }
                let inner = try parseAlt()
                guard i < chars.count, chars[i] == ")" else { throw fail("'(' is never closed", open) }
                i += 1
                depth -= 1
                return inner
            case "[": return .set(try parseClass())
            case ".": i += 1; return .dot
            case "^": i += 1; return .start
            case "$": i += 1; return .end
            case "*", "+", "?": throw fail("'\(c)' has nothing to repeat")
            case "\\":
                i += 1
                guard i < chars.count else { throw fail("pattern ends with a lone backslash") }
                let e = chars[i]
                i += 1
                if let b = CharClass.builtinEscape(e) { return .set(CharClass(builtins: [b])) }
                if ("1"..."9").contains(e) { throw fail("backreferences are not supported", i - 2) }
                if ["b", "B", "A", "z", "Z", "G", "p", "P", "Q", "E", "k"].contains(e) { throw fail("\\\(e) is not supported", i - 2) }
                return literal(try escapedScalar(e))
            default:
                i += 1
                return literal(c)
            }
        }

        /// A literal folded like the text; folding may turn one character into several ("ß" → "ss").
        func literal(_ u: Unicode.Scalar) -> Node {
            let f = Array(TextFold.fold(String(u), options).unicodeScalars)
            if f.count == 1 { return .literal(f[0]) }
            return f.isEmpty ? .empty : .concat(f.map { .literal($0) })
        }

        mutating func escapedScalar(_ e: Unicode.Scalar) throws -> Unicode.Scalar {
            switch e {
            case "n": return "\n"
            case "t": return "\t"
            case "r": return "\r"
            case "f": return "\u{0C}"
            case "u":
                let hex = String(String.UnicodeScalarView(chars[i..<min(i + 4, chars.count)]))
                guard hex.count == 4, let v = UInt32(hex, radix: 16), let u = Unicode.Scalar(v) else { throw fail("\\u needs four hex digits") }
                i += 4
                return u
            default:
                if e.properties.isAlphabetic || ("0"..."9").contains(e) { throw fail("unknown escape \\\(e)", i - 2) }
                return e
            }
        }

        mutating func parseClass() throws -> CharClass {
            let open = i
            i += 1
            var cc = CharClass()
            if i < chars.count, chars[i] == "^" { cc.negated = true; i += 1 }
            var first = true
            while true {
                guard i < chars.count else { throw fail("'[' is never closed", open) }
                var c = chars[i]
                if c == "]" && !first { i += 1; break }
                if c == "[" { throw fail("nested classes and set operations are not supported") }
                first = false
                i += 1
                if c == "\\" {
                    guard i < chars.count else { throw fail("'[' is never closed", open) }
                    let e = chars[i]
                    i += 1
                    if let b = CharClass.builtinEscape(e) { cc.builtins.append(b); continue }
                    c = try escapedScalar(e)
                }
                var hiScalar = c
                if i + 1 < chars.count, chars[i] == "-", chars[i + 1] != "]" {
                    i += 1
                    var h = chars[i]
                    i += 1
                    if h == "\\" {
                        guard i < chars.count else { throw fail("'[' is never closed", open) }
                        h = try escapedScalar(chars[i]); i += 1
                    }
                    guard h.value >= c.value else { throw fail("range \(c)-\(h) is reversed") }
                    hiScalar = h
                }
                // folded text: a literal range member also stands for its folded form
                cc.ranges.append(c.value...hiScalar.value)
                if c == hiScalar, !options.isEmpty {
                    for f in TextFold.fold(String(c), options).unicodeScalars where f != c { cc.ranges.append(f.value...f.value) }
                }
            }
            return cc
        }
    }
}

extension CharClass {
    static func builtinEscape(_ e: Unicode.Scalar) -> Builtin? {
        switch e {
        case "d": .digit
        case "D": .notDigit
        case "w": .word
        case "W": .notWord
        case "s": .space
        case "S": .notSpace
        default: nil
        }
    }
}
