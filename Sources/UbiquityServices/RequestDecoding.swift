import UbiquityProtos

/// Hand-written decoders for the common form of hot requests, tried before SwiftProtobuf's
/// generic decoder. Each accepts only an unambiguous form and returns nil for anything else; the
/// caller then decodes with SwiftProtobuf, so an unusual request gets exactly the message — or the
/// error — it always got. Tests compare both decoders on varied and malformed inputs
/// (`RequestDecodingTests`).
enum RequestDecoding {
    /// `GetObjectsRequest` whose bytes hold only fields 1 (`store_id`) and 2 (`object_ids`) as
    /// length-delimited fields of valid UTF-8 (read with `WireReader`): what clients send for a
    /// read at the current generation. nil for anything else (field 3 `at`, unknown fields —
    /// SwiftProtobuf would keep them —, other wire types, truncation, invalid UTF-8).
    static func getObjects(_ bytes: [UInt8]) -> Ubiquity_V1_GetObjectsRequest? {
        bytes.withUnsafeBufferPointer { buf -> Ubiquity_V1_GetObjectsRequest? in
            var req = Ubiquity_V1_GetObjectsRequest()
            guard let base = buf.baseAddress else { return req }
            var r = WireReader(base, buf.count)
            do {
                while let (field, wire) = try r.tag() {
                    switch (field, wire) {
                    case (1, 2): req.storeID = try r.string()
                    case (2, 2): req.objectIds.append(try r.string())
                    default: return nil
                    }
                }
            } catch {
                return nil
            }
            return req
        }
    }

    /// `FetchRequest` in its common form: `store_id`, `at` (token, minimum generation) and a
    /// `fetch` with scalar fields (entity, predicate, limits, result type, having predicate,
    /// flags) and `variables` whose values are single scalars (null, string, bool, integers,
    /// float, double). nil for anything else — sort descriptors and other repeated fields, list
    /// or message-valued arguments (lists, dates, …), unknown enum values, a message field or
    /// oneof given twice (SwiftProtobuf would merge them), unknown fields, other wire types,
    /// truncation, invalid UTF-8. Singular scalar fields given twice: the last wins, as in
    /// SwiftProtobuf. `FetchRequestDecodingTests` compares both decoders.
    static func fetch(_ bytes: [UInt8]) -> Ubiquity_V1_FetchRequest? {
        bytes.withUnsafeBufferPointer { buf in
            guard let base = buf.baseAddress else { return Ubiquity_V1_FetchRequest() }
            var r = WireReader(base, buf.count)
            return try? fetchRequest(&r)
        }
    }

    private static func fetchRequest(_ r: inout WireReader) throws -> Ubiquity_V1_FetchRequest {
        var req = Ubiquity_V1_FetchRequest()
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): req.storeID = try r.string()
            case (2, 2):
                guard !req.hasFetch else { throw NotFast() }
                var m = try r.message()
                req.fetch = try fetchSpec(&m)
            case (3, 2):
                guard !req.hasAt else { throw NotFast() }
                var m = try r.message()
                var at = Ubiquity_V1_ReadGeneration()
                while let (f, w) = try m.tag() {
                    switch (f, w) {
                    case (1, 2): at.token = try m.data()
                    case (2, 0): at.minimumGeneration = Int64(bitPattern: try m.varint())
                    default: throw NotFast()
                    }
                }
                req.at = at
            default: throw NotFast()
            }
        }
        return req
    }

    private static func fetchSpec(_ r: inout WireReader) throws -> Ubiquity_V1_FetchSpec {
        var f = Ubiquity_V1_FetchSpec()
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): f.entity = try r.string()
            case (2, 2): f.predicate = try r.string()
            case (3, 2):
                var e = try r.message()
                var key = "", value: Ubiquity_V1_Argument?
                while let (k, w) = try e.tag() {
                    switch (k, w) {
                    case (1, 2): key = try e.string()
                    case (2, 2):
                        guard value == nil else { throw NotFast() }
                        var m = try e.message()
                        value = try argument(&m)
                    default: throw NotFast()
                    }
                }
                f.variables[key] = value ?? Ubiquity_V1_Argument()
            case (5, 0): f.fetchLimit = Int32(truncatingIfNeeded: try r.varint())
            case (6, 0): f.fetchOffset = Int32(truncatingIfNeeded: try r.varint())
            case (7, 0): f.fetchBatchSize = Int32(truncatingIfNeeded: try r.varint())
            case (8, 0):
                let v = Int32(truncatingIfNeeded: try r.varint())
                guard (0...4).contains(v), let t = Ubiquity_V1_ResultType(rawValue: Int(v)) else { throw NotFast() }
                f.resultType = t
            case (11, 2): f.havingPredicate = try r.string()
            case (12, 0): f.returnsDistinctResults = try r.varint() != 0
            case (14, 0): f.excludesSubentities = try r.varint() != 0
            default: throw NotFast()
            }
        }
        return f
    }

    /// An `Argument` holding one scalar `Value`.
    private static func argument(_ r: inout WireReader) throws -> Ubiquity_V1_Argument {
        var a = Ubiquity_V1_Argument()
        while let (field, wire) = try r.tag() {
            guard field == 1, wire == 2, a.kind == nil else { throw NotFast() }
            var m = try r.message()
            var v = Ubiquity_V1_Value()
            while let (k, w) = try m.tag() {
                guard v.kind == nil else { throw NotFast() }
                switch (k, w) {
                case (1, 0):
                    guard try m.varint() == 0 else { throw NotFast() }
                    v.kind = .nullValue(.nullValue)
                case (2, 2): v.kind = .stringValue(try m.string())
                case (3, 0): v.kind = .boolValue(try m.varint() != 0)
                case (4, 0): v.kind = .int16Value(Int32(truncatingIfNeeded: try m.varint()))
                case (5, 0): v.kind = .int32Value(Int32(truncatingIfNeeded: try m.varint()))
                case (6, 0): v.kind = .int64Value(Int64(bitPattern: try m.varint()))
                case (7, 5): v.kind = .floatValue(Float(bitPattern: try m.fixed32()))
                case (8, 1): v.kind = .doubleValue(Double(bitPattern: try m.fixed64()))
                default: throw NotFast()
                }
            }
            a.kind = .value(v)
        }
        return a
    }
}
