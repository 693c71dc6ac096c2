// Tokens of the NSPredicate format language. Columns are 1-based character positions.

enum TokenKind: Equatable {
    case identifier(String)       // bare, or escaped with '#'
    case keyword(String)          // upper-cased reserved word
    case string(String)
    case integer(Int64)
    case real(Double)
    case variable(String)         // $name
    case function(String)         // @count, @sum, … (name without '@')
    case symbol(String)           // == != < <= > >= && || ! ( ) { } , . [ ] + - * / :
    case end
}

struct Token: Equatable {
    var kind: TokenKind
    var column: Int
    /// The token's text as written (for messages).
    var text: String
}

enum Lexer {
    static let keywords: Set<String> = [
        "AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "IN", "BETWEEN", "CONTAINS", "BEGINSWITH", "ENDSWITH",
        "LIKE", "MATCHES", "TRUEPREDICATE", "FALSEPREDICATE", "NIL", "NULL", "TRUE", "FALSE", "YES", "NO", "SELF",
        "SUBQUERY", "FUNCTION", "FIRST", "LAST", "SIZE", "CAST",
    ]

    static func tokenize(_ text: String, field: String) throws -> [Token] {
        let cs = Array(text)
        var out: [Token] = []
        var i = 0
        func err(_ m: String, _ at: Int) -> QueryError { QueryError(.syntax, "\(m) at column \(at + 1)", column: at + 1, field: field) }
        func isIdentStart(_ c: Character) -> Bool { c == "_" || c.isLetter }
        func isIdentChar(_ c: Character) -> Bool { c == "_" || c.isLetter || c.isNumber }
        while i < cs.count {
            let c = cs[i]
            if c.isWhitespace { i += 1; continue }
            let start = i
            func add(_ k: TokenKind) { out.append(Token(kind: k, column: start + 1, text: String(cs[start..<i]))) }
            if c == "'" || c == "\"" {
                i += 1
                var s = ""
                var closed = false
                while i < cs.count {
                    let d = cs[i]
                    if d == c { closed = true; i += 1; break }
                    if d == "\\" {
                        guard i + 1 < cs.count else { break }
                        let e = cs[i + 1]
                        i += 2
                        switch e {
                        case "n": s.append("\n")
                        case "t": s.append("\t")
                        case "r": s.append("\r")
                        case "0": s.append("\0")
                        case "\\", "'", "\"": s.append(e)
                        case "u":
                            let hex = String(cs[i..<min(i + 4, cs.count)])
                            guard hex.count == 4, let v = UInt32(hex, radix: 16), let u = Unicode.Scalar(v) else {
                                throw err("\\u needs four hex digits naming a character", i - 2)
                            }
                            s.unicodeScalars.append(u)
                            i += 4
                        default:
                            // keep unknown escapes as written (LIKE and MATCHES give them meaning)
                            s.append("\\"); s.append(e)
                        }
                        continue
                    }
                    s.append(d)
                    i += 1
                }
                if !closed { throw err("unterminated string (opened with \(c))", start) }
                add(.string(s))
            } else if c.isASCII && c.isNumber {
                if c == "0", i + 1 < cs.count, cs[i + 1] == "x" || cs[i + 1] == "X" {
                    i += 2
                    let h = i
                    while i < cs.count, cs[i].isHexDigit { i += 1 }
                    guard i > h, let v = Int64(String(cs[h..<i]), radix: 16) else { throw err("malformed hexadecimal number", start) }
                    add(.integer(v))
                    continue
                }
                while i < cs.count, cs[i].isASCII, cs[i].isNumber { i += 1 }
                var isReal = false
                if i + 1 < cs.count, cs[i] == ".", cs[i + 1].isASCII, cs[i + 1].isNumber {
                    isReal = true
                    i += 1
                    while i < cs.count, cs[i].isASCII, cs[i].isNumber { i += 1 }
                }
                if i < cs.count, cs[i] == "e" || cs[i] == "E" {
                    var j = i + 1
                    if j < cs.count, cs[j] == "+" || cs[j] == "-" { j += 1 }
                    if j < cs.count, cs[j].isASCII, cs[j].isNumber {
                        isReal = true
                        i = j
                        while i < cs.count, cs[i].isASCII, cs[i].isNumber { i += 1 }
                    }
                }
                if i < cs.count, isIdentChar(cs[i]) { throw err("malformed number '\(String(cs[start...i]))'", start) }
                let t = String(cs[start..<i])
                if isReal {
                    guard let d = Double(t), d.isFinite else { throw err("number \(t) is out of range", start) }
                    add(.real(d))
                } else {
                    guard let v = Int64(t) else { throw err("integer \(t) is out of range (64-bit)", start) }
                    add(.integer(v))
                }
            } else if isIdentStart(c) || c == "#" {
                let escaped = c == "#"
                if escaped { i += 1 }
                let s = i
                while i < cs.count, isIdentChar(cs[i]) { i += 1 }
                if i == s { throw err("'#' must be followed by a name", start) }
                let word = String(cs[s..<i])
                if !escaped, keywords.contains(word.uppercased()) { add(.keyword(word.uppercased())) } else { add(.identifier(word)) }
            } else if c == "$" {
                i += 1
                let s = i
                while i < cs.count, isIdentChar(cs[i]) { i += 1 }
                if i == s { throw err("'$' must be followed by a variable name", start) }
                add(.variable(String(cs[s..<i])))
            } else if c == "@" {
                i += 1
                let s = i
                while i < cs.count, isIdentChar(cs[i]) { i += 1 }
                if i == s { throw err("'@' must be followed by a function name such as count", start) }
                add(.function(String(cs[s..<i])))
            } else {
                let two = i + 1 < cs.count ? String(cs[i...i + 1]) : ""
                let map2: [String: String] = ["==": "==", "!=": "!=", "<>": "!=", "<=": "<=", "=<": "<=", ">=": ">=", "=>": ">=", "&&": "&&", "||": "||"]
                if let s = map2[two] {
                    i += 2
                    out.append(Token(kind: .symbol(s), column: start + 1, text: two))
                } else if "=<>!(){},.[]+-*/:".contains(c) {
                    i += 1
                    add(.symbol(c == "=" ? "==" : String(c)))
                } else {
                    throw err("unexpected character '\(c)'", start)
                }
            }
        }
        out.append(Token(kind: .end, column: cs.count + 1, text: "end of predicate"))
        return out
    }
}
