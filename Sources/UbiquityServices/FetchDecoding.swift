// Stores.Fetch's request read straight from its bytes into the engine's types (docs/protocol.md,
// "Hand-encoded messages"): no generated messages, no `Convert.fetchRequest`. Only the common
// form is read; anything else goes to SwiftProtobuf and `Convert` as before, so its result or
// error is unchanged. `FetchRequestDecodingTests` compares both routes.
import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// A Fetch request as the handler uses it: what `Convert.fetchRequest(req.fetch, field:)` and
/// `Convert.readGeneration(req.at, field:)` make of the decoded message.
struct DecodedFetch: Equatable, Sendable {
    var storeID = ""
    var request = FetchRequest(entity: "")
    var at = ReadGeneration.current
    var minimumGeneration: Int64?

    static func == (a: DecodedFetch, b: DecodedFetch) -> Bool {
        let sameAt: Bool = switch (a.at, b.at) {
        case (.current, .current): true
        case (.token(let x), .token(let y)): x == y
        default: false
        }
        return sameAt && a.storeID == b.storeID && a.request == b.request && a.minimumGeneration == b.minimumGeneration
    }
}

enum FetchDecoding {
    /// The common form: `store_id`, `at` (a well-formed token or none, a minimum generation) and
    /// a `fetch` of an entity with scalar fields (predicate, non-negative limits, a known result
    /// type, having predicate, flags) and `variables` each holding one scalar value (null,
    /// string, bool, int16/32/64, float, double). nil for anything else — sort descriptors and
    /// other repeated fields, list or message-valued arguments (lists, dates, …), unknown enum
    /// values, a message field or oneof given twice (SwiftProtobuf would merge them), unknown
    /// fields, other wire types, truncation, invalid UTF-8, and whatever the conversion rejects
    /// (no entity, negative limits, a malformed token). Singular scalar fields given twice: the
    /// last wins, as in SwiftProtobuf.
    static func decode(_ bytes: [UInt8]) -> DecodedFetch? {
        bytes.withUnsafeBufferPointer { buf in
            guard let base = buf.baseAddress else { return nil }  // no entity
            var r = WireReader(base, buf.count)
            return try? fetch(&r)
        }
    }

    private static func fetch(_ r: inout WireReader) throws -> DecodedFetch {
        var out = DecodedFetch()
        var sawFetch = false, sawAt = false
        var token: UnsafeBufferPointer<UInt8>?
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): out.storeID = try r.string()
            case (2, 2):
                guard !sawFetch else { throw NotFast() }
                sawFetch = true
                var m = try r.message()
                out.request = try spec(&m)
            case (3, 2):
                guard !sawAt else { throw NotFast() }
                sawAt = true
                var m = try r.message()
                while let (f, w) = try m.tag() {
                    switch (f, w) {
                    case (1, 2): token = try m.body()
                    case (2, 0):
                        let g = Int64(bitPattern: try m.varint())
                        out.minimumGeneration = g > 0 ? g : nil
                    default: throw NotFast()
                    }
                }
            default: throw NotFast()
            }
        }
        guard !out.request.entity.isEmpty else { throw NotFast() }
        if let token, !token.isEmpty {
            guard let t = try? GenerationToken(bytes: Array(token)) else { throw NotFast() }
            out.at = .token(t)
        }
        return out
    }

    /// A `FetchSpec` as `Convert.fetchRequest` makes it.
    private static func spec(_ r: inout WireReader) throws -> FetchRequest {
        var f = FetchRequest(entity: "")
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): f.entity = try r.string()
            case (2, 2): let p = try r.string(); f.predicate = p.isEmpty ? nil : p
            case (3, 2):
                var e = try r.message()
                var key = "", value = QueryArgument.scalar(.null), sawValue = false
                while let (k, w) = try e.tag() {
                    switch (k, w) {
                    case (1, 2): key = try e.string()
                    case (2, 2):
                        guard !sawValue else { throw NotFast() }
                        sawValue = true
                        var m = try e.message()
                        value = .scalar(try argument(&m))
                    default: throw NotFast()
                    }
                }
                f.variables[key] = value
            case (5, 0): f.fetchLimit = try nonNegativeInt32(&r)
            case (6, 0): f.fetchOffset = try nonNegativeInt32(&r)
            case (7, 0): f.fetchBatchSize = try nonNegativeInt32(&r)
            case (8, 0):
                switch Int32(truncatingIfNeeded: try r.varint()) {
                case 0, 1: f.resultType = .objects
                case 2: f.resultType = .objectIDs
                case 3: f.resultType = .dictionaries
                case 4: f.resultType = .count
                default: throw NotFast()
                }
            case (11, 2): let p = try r.string(); f.havingPredicate = p.isEmpty ? nil : p
            case (12, 0): f.returnsDistinctResults = try r.varint() != 0
            case (14, 0): f.includesSubentities = try r.varint() == 0
            default: throw NotFast()
            }
        }
        return f
    }

    /// An int32 field that must not be negative (the conversion rejects negative limits).
    private static func nonNegativeInt32(_ r: inout WireReader) throws -> Int {
        let v = Int32(truncatingIfNeeded: try r.varint())
        guard v >= 0 else { throw NotFast() }
        return Int(v)
    }

    /// An `Argument` holding one scalar `Value` (or nothing: null), as `Convert.storageValue`.
    private static func argument(_ r: inout WireReader) throws -> StorageValue {
        var out = StorageValue.null, sawValue = false
        while let (field, wire) = try r.tag() {
            guard field == 1, wire == 2, !sawValue else { throw NotFast() }
            sawValue = true
            var m = try r.message()
            var sawKind = false
            while let (k, w) = try m.tag() {
                guard !sawKind else { throw NotFast() }
                sawKind = true
                switch (k, w) {
                case (1, 0): guard try m.varint() == 0 else { throw NotFast() }; out = .null
                case (2, 2): out = .string(try m.string())
                case (3, 0): out = .bool(try m.varint() != 0)
                case (4, 0), (5, 0): out = .int(Int64(Int32(truncatingIfNeeded: try m.varint())))
                case (6, 0): out = .int(Int64(bitPattern: try m.varint()))
                case (7, 5): out = .double(Double(Float(bitPattern: try m.fixed32())))
                case (8, 1): out = .double(Double(bitPattern: try m.fixed64()))
                default: throw NotFast()
                }
            }
        }
        return out
    }
}
