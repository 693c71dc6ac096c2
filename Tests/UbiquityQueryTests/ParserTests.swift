import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Golden tests: predicate text → canonical form, and syntax errors → message and column.
final class ParserTests: XCTestCase {
    func testCanonicalForms() throws {
        let golden: [(String, String)] = [
            ("name == 'Ann'", #"name == "Ann""#),
            ("name = \"Ann\"", #"name == "Ann""#),
            ("age >= 18 AND age < 65", "(age >= 18 AND age < 65)"),
            ("age => 18 && age =< 65 || flag == YES", "((age >= 18 AND age <= 65) OR flag == YES)"),
            ("NOT (a == 1 OR b != 2)", "NOT (a == 1 OR b != 2)"),
            ("!a <> 1", "NOT a != 1"),
            ("name BEGINSWITH[cd] 'é'", #"name BEGINSWITH[cd] "é""#),
            ("name like[c] '*x?'", #"name LIKE[c] "*x?""#),
            ("name MATCHES '[a-z]+\\\\d'", #"name MATCHES "[a-z]+\\d""#),
            ("age BETWEEN {1, 10}", "age BETWEEN {1, 10}"),
            ("age IN {1,2,3}", "age IN {1, 2, 3}"),
            ("age in $ages", "age IN $ages"),
            ("ANY items.price > 5", "ANY items.price > 5"),
            ("SOME items.price > 5", "ANY items.price > 5"),
            ("ALL items.price > 5 AND NONE tags.label == 'x'", #"(ALL items.price > 5 AND NONE tags.label == "x")"#),
            ("items.@count > 2", "items.@count > 2"),
            ("items.@sum.price <= 10.5", "items.@sum.price <= 10.5"),
            ("dept.title == nil", "dept.title == nil"),
            ("mentor != NULL", "mentor != nil"),
            ("SELF == $me", "SELF == $me"),
            ("TRUEPREDICATE", "TRUEPREDICATE"),
            ("falsepredicate", "FALSEPREDICATE"),
            ("#in == 1", "in == 1"),
            ("#size.value == -3", "size.value == -3"),
            ("x == 0x1F", "x == 31"),
            ("x == 1.5e3", "x == 1500.0"),
            ("name == 'it\\'s' AND email == \"say \\\"hi\\\"\"", #"(name == "it's" AND email == "say \"hi\"")"#),
            ("name == '\\u00e9'", #"name == "é""#),
            ("((a == 1))", "a == 1"),
            ("a == 1 AND b == 2 AND c == 3", "(a == 1 AND b == 2 AND c == 3)"),
            ("a == 1 OR b == 2 AND c == 3", "(a == 1 OR (b == 2 AND c == 3))"),
            ("5 < age", "5 < age"),
            ("name CONTAINS[d] 'a'", #"name CONTAINS[d] "a""#),
            ("name ENDSWITH 'z'", #"name ENDSWITH "z""#),
            ("ages == {}", "ages == {}"),
        ]
        for (input, expected) in golden {
            XCTAssertEqual(try Predicate.canonicalForm(input), expected, "input: \(input)")
        }
    }

    func testSyntaxErrors() {
        let cases: [(String, QueryError.Reason, Int, String)] = [
            ("name == ", .syntax, 9, "expected a value after '==' at column 9"),
            ("age > 5 AND name == 'Émile' AND", .syntax, 32, "expected a comparison after 'AND' at column 32"),
            ("name == 'Ann' AND age >", .syntax, 24, "expected a value after '>' at column 24"),
            ("name 'Ann'", .syntax, 6, "expected a comparison operator (==, !=, <, >, IN, CONTAINS, …) after 'name', found ''Ann'' at column 6"),
            ("name == 'Ann", .syntax, 9, "unterminated string (opened with ') at column 9"),
            ("(age > 5", .syntax, 9, "expected ')' to close the '(' at column 1, found end of predicate at column 9"),
            ("age > 5)", .syntax, 8, "unexpected ')' after a complete predicate (missing AND or OR?) at column 8"),
            ("age > 5 name == 'x'", .syntax, 9, "unexpected 'name' after a complete predicate (missing AND or OR?) at column 9"),
            ("", .syntax, 1, "empty predicate: write a comparison, or TRUEPREDICATE for every object at column 1"),
            ("age > 5 AND", .syntax, 12, "expected a comparison after 'AND' at column 12"),
            ("age ~ 5", .syntax, 5, "unexpected character '~' at column 5"),
            ("name ==[x] 'a'", .syntax, 9, "unknown comparison option 'x' (use [c], [d] or [cd]) at column 9"),
            ("age IN {1, 2", .syntax, 13, "expected ',' or '}' in the list opened at column 8, found end of predicate at column 13"),
            ("age == 99999999999999999999", .syntax, 8, "integer 99999999999999999999 is out of range (64-bit) at column 8"),
            ("age + 1 > 5", .unsupported, 5, "arithmetic ('+') is not supported at column 5"),
            ("SUBQUERY(items, $x, $x.price > 5).@count > 0", .unsupported, 1, "SUBQUERY is not supported at column 1"),
            ("items[0].price > 5", .unsupported, 6, "indexing with [ ] is not supported at column 6"),
            ("name == AND", .syntax, 9, "expected a value after '==', found keyword AND (write #AND for a property with that name) at column 9"),
            ("$ == 1", .syntax, 1, "'$' must be followed by a variable name at column 1"),
            ("@count > 1", .syntax, 1, "'@count' must follow a to-many key path (e.g. items.@count) at column 1"),
            ("name == 'a' AND AND", .syntax, 17, "expected a comparison before 'AND' at column 17"),
            ("x == 12abc", .syntax, 6, "malformed number '12a' at column 6"),
        ]
        for (input, reason, column, message) in cases {
            do {
                _ = try Predicate.canonicalForm(input)
                XCTFail("no error for \(input)")
            } catch let e as QueryError {
                XCTAssertEqual(e.reason, reason, input)
                XCTAssertEqual(e.column, column, input)
                XCTAssertEqual(e.message, message, input)
                XCTAssertEqual(e.field, "predicate")
            } catch { XCTFail("\(input): \(error)") }
        }
    }

    func testLimits() {
        var limits = QueryLimits()
        limits.maxPredicateLength = 50
        XCTAssertEqual(error { _ = try Predicate.canonicalForm(String(repeating: "a == 1 OR ", count: 10) + "a == 1", limits: limits) }?.reason, .limitExceeded)
        // deep nesting never reaches the stack: parentheses, NOT, ! and lists all count
        var roomy = QueryLimits()
        roomy.maxPredicateLength = 1_000_000
        for deep in [String(repeating: "(", count: 100_000) + "a == 1" + String(repeating: ")", count: 100_000),
                     String(repeating: "NOT ", count: 100_000) + "a == 1",
                     String(repeating: "!", count: 100_000) + "a == 1"] {
            let e = error { _ = try Predicate.canonicalForm(deep, limits: roomy) }
            XCTAssertEqual(e?.reason, .limitExceeded)
            XCTAssertEqual(e?.message.hasPrefix("predicate nests deeper than 64 levels"), true, e?.message ?? "")
        }
        let wide = (0..<1500).map { "a == \($0)" }.joined(separator: " OR ")
        XCTAssertEqual(error { _ = try Predicate.canonicalForm(wide, limits: roomy) }?.message.hasPrefix("predicate has more than 2000 nodes"), true)
        var small = QueryLimits()
        small.maxInListSize = 3
        small.maxNodes = 100_000
        XCTAssertEqual(error { _ = try Predicate.canonicalForm("a IN {1, 2, 3, 4}", limits: small) }?.reason, .limitExceeded)
        XCTAssertNoThrow(try Predicate.canonicalForm("a IN {1, 2, 3}", limits: small))
    }

    func error(_ body: () throws -> Void) -> QueryError? {
        do { try body(); return nil } catch let e as QueryError { return e } catch { return nil }
    }

    // MARK: type checking against the model

    func check(_ text: String, _ vars: [String: QueryArgument] = [:], entity: String = "Person") -> QueryError? {
        error { _ = try Predicate.parse(text, entity: entity, model: QFixtures.model, variables: vars) }
    }

    func testTypeChecking() {
        XCTAssertNil(check("name == 'a' AND age > 3 AND score < 2.5 AND flag == YES AND salary > 10 AND born > 0"))
        XCTAssertNil(check("code == '6ba7b810-9dad-11d1-80b4-00c04fd430c8' AND site BEGINSWITH 'https:'"))
        XCTAssertNil(check("mentor.mentor.name ==[cd] 'x' AND ANY friends.age > age AND notes.@count > 1 AND notes.@avg.n > 2"))
        XCTAssertNil(check("title == 'boss' AND dept.title == 'x' AND dept.employees.@count > 1", entity: "Employee"))
        XCTAssertNil(check("photo == $p", ["p": .scalar(.binary(Data([1])))]))
        XCTAssertNil(check("born > $d AND age IN $ages", ["d": .scalar(.date(5)), "ages": .list([.int(1), .int(2)])]))

        let e1 = check("nmae == 'x'")
        XCTAssertEqual(e1?.reason, .unknownKeyPath)
        XCTAssertEqual(e1?.message, "Person has no property 'nmae' (did you mean 'name'?) at column 1")
        XCTAssertEqual(check("name.first == 'x'")?.message, "Person.name is an attribute; 'name.first' cannot continue after it at column 1")
        XCTAssertEqual(check("title == 'x'")?.reason, .unknownKeyPath)  // sub-entity attribute, not Person's
        XCTAssertEqual(check("age == 'old'")?.message, "int32 cannot be compared with the string \"old\" at column 8")
        XCTAssertEqual(check("name > 5")?.reason, .typeMismatch)
        XCTAssertEqual(check("age CONTAINS 'x'")?.message, "CONTAINS needs a string on its left side, not int32 at column 5")
        XCTAssertEqual(check("age ==[c] 5")?.message, "[c] and [d] apply to strings, not int32 at column 5")
        XCTAssertEqual(check("code == 'nope'")?.message, "'nope' is not a UUID at column 9")
        XCTAssertEqual(check("code < '6ba7b810-9dad-11d1-80b4-00c04fd430c8'")?.reason, .typeMismatch)
        XCTAssertEqual(check("photo == 'x'")?.reason, .typeMismatch)
        XCTAssertEqual(check("age > $missing")?.reason, .unboundVariable)
        XCTAssertEqual(check("age > $missing")?.message, "no value was given for $missing at column 7")
        XCTAssertEqual(check("ANY age > 5")?.reason, .typeMismatch)
        XCTAssertEqual(check("age BETWEEN {1}")?.message, "BETWEEN needs exactly two values, {low, high}; got 1 at column 13")
        XCTAssertEqual(check("age IN {1, nil}")?.reason, .typeMismatch)
        XCTAssertEqual(check("name.@count > 1")?.reason, .typeMismatch)
        XCTAssertEqual(check("notes.@sum.text > 1")?.message, "@sum needs a numeric attribute; text is string at column 1")
        XCTAssertEqual(check("notes.@distinctUnionOfObjects.n > 1")?.reason, .unsupported)
        XCTAssertEqual(check("mentor == 'not-an-id'")?.reason, .typeMismatch)
        XCTAssertEqual(check("1 == 1")?.reason, .typeMismatch)
        XCTAssertEqual(check("name MATCHES '(a'")?.message, "'(' is never closed in MATCHES pattern at character 1 at column 15")
        XCTAssertEqual(check("name MATCHES 'a\\\\1'")?.reason, .syntax)
        XCTAssertEqual(check("name MATCHES 'a{2000}'")?.reason, .syntax)
        XCTAssertEqual(check("name MATCHES '(a{900}){900}'")?.reason, .limitExceeded)
        XCTAssertEqual(check("ANY friends.age > ANY friends.age")?.reason, .syntax)
        XCTAssertEqual(check("ANY friends.age > friends.age")?.reason, .unsupported)
        XCTAssertEqual(error { _ = try Predicate.parse("a == 1", entity: "Nope", model: QFixtures.model) }?.reason, .unknownEntity)
    }
}
