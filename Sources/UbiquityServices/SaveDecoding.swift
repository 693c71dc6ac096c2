import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityStorage

/// A `SaveRequest` decoded straight into the engine's types (no `Ubiquity_V1_Value` messages, no
/// SwiftProtobuf map decoding). Relationship targets given as object IDs are parsed but not yet
/// checked against the store (`foreignReference`).
struct DecodedSave: Sendable {
    var storeID = ""
    var inserts: [InsertOperation] = []
    var mergePolicy: MergePolicy = .error
    var author = ""
    var contextName = ""
    var clientTransactionID = ""
    var dryRun = false
    var conflictsInResponse = false

    /// True when some relationship target names an object of another store than `store`.
    func foreignReference(store: UUID) -> Bool {
        for i in inserts {
            for (_, refs) in i.relationships {
                for case .permanent(let id) in refs where id.storeID != store { return true }
            }
        }
        return false
    }

    /// The engine's save (for a request without `foreignReference`, which the general
    /// conversion reports).
    var saveRequest: SaveRequest {
        var s = SaveRequest()
        s.inserts = inserts
        s.mergePolicy = mergePolicy
        s.author = author.nonEmpty
        s.contextName = contextName.nonEmpty
        s.clientTransactionID = clientTransactionID.nonEmpty
        s.dryRun = dryRun
        return s
    }
}

/// The fast reading of a Save request. It covers exactly what the Save handler would accept: a
/// request with inserts only whose every field converts without error. Anything else — updates or
/// deletes, a value, ID or enum the conversion rejects, malformed or unusual wire data (wrong wire
/// type, groups, a map entry or oneof given twice, invalid UTF-8) — returns nil, and the handler
/// decodes the request with SwiftProtobuf and converts it as before, so its result or error is
/// unchanged. A non-nil result equals what `Convert` makes of SwiftProtobuf's decode.
enum SaveDecoding {
    static func decode(_ data: [UInt8]) -> DecodedSave? {
        data.withUnsafeBytes { raw -> DecodedSave? in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return DecodedSave() }
            var r = WireReader(base, raw.count)
            return try? saveRequest(&r)
        }
    }

    private static func saveRequest(_ r: inout WireReader) throws -> DecodedSave {
        var s = DecodedSave()
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): s.storeID = try r.string()
            case (2, 2):
                var sub = try r.message()
                s.inserts.append(try insert(&sub))
            case (5, 0):
                switch Int32(truncatingIfNeeded: try r.varint()) {
                case 0, 1: s.mergePolicy = .error
                case 2: s.mergePolicy = .mergeByPropertyStoreTrump
                case 3: s.mergePolicy = .mergeByPropertyObjectTrump
                case 4: s.mergePolicy = .overwrite
                case 5: s.mergePolicy = .rollback
                default: throw NotFast()
                }
            case (6, 2): s.author = try r.string()
            case (7, 2): s.contextName = try r.string()
            case (8, 2): s.clientTransactionID = try r.string()
            case (9, 0): s.dryRun = try r.varint() != 0
            case (10, 0): s.conflictsInResponse = try r.varint() != 0
            case (1...10, _): throw NotFast()  // updates, deletes, or a known field with another wire type
            default: try r.skip(wire)
            }
        }
        return s
    }

    private static func insert(_ r: inout WireReader) throws -> InsertOperation {
        var temporaryID = "", entity = ""
        var values = [String: StorageValue](minimumCapacity: 4)  // no regrowth for the usual few values
        var relationships: [String: [ObjectReference]] = [:]
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): temporaryID = try r.string()
            case (2, 2): entity = try r.string()
            case (3, 2):
                var entry = try r.message()
                let (k, v) = try valueEntry(&entry)
                values[k] = v
            case (4, 2):
                var entry = try r.message()
                let (k, v) = try relationshipEntry(&entry)
                relationships[k] = v
            case (1...4, _): throw NotFast()
            default: try r.skip(wire)
            }
        }
        guard !temporaryID.isEmpty, !entity.isEmpty else { throw NotFast() }
        return InsertOperation(temporaryID: temporaryID, entity: entity, values: values, relationships: relationships)
    }

    /// One `map<string, Value>` entry: a missing key is "", a missing value is null.
    private static func valueEntry(_ r: inout WireReader) throws -> (String, StorageValue) {
        var key = ""
        var value: StorageValue?
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): key = try r.string()
            case (2, 2):
                guard value == nil else { throw NotFast() }  // a second value would be merged into the first
                var sub = try r.message()
                value = try storageValue(&sub)
            case (1...2, _): throw NotFast()
            default: try r.skip(wire)
            }
        }
        return (key, value ?? .null)
    }

    /// A `Value` message as `Convert.storageValue` reads it; no kind is null.
    private static func storageValue(_ r: inout WireReader) throws -> StorageValue {
        var out: StorageValue = .null
        var seen = false
        while let (field, wire) = try r.tag() {
            guard (1...13).contains(field) else { try r.skip(wire); continue }
            guard !seen else { throw NotFast() }  // a oneof given twice (last wins, or messages merge)
            seen = true
            switch (field, wire) {
            case (1, 0): _ = try r.varint(); out = .null
            case (2, 2): out = .string(try r.string())
            case (3, 0): out = .bool(try r.varint() != 0)
            case (4, 0), (5, 0): out = .int(Int64(Int32(truncatingIfNeeded: try r.varint())))
            case (6, 0): out = .int(Int64(bitPattern: try r.varint()))
            case (7, 5): out = .double(Double(Float(bitPattern: try r.fixed32())))
            case (8, 1): out = .double(Double(bitPattern: try r.fixed64()))
            case (9, 2):
                let s = try r.string()
                guard Convert.isDecimal(s) else { throw NotFast() }
                out = .decimal(s)
            case (10, 2):
                var sub = try r.message()
                out = .date(try timestamp(&sub))
            case (11, 2): out = .binary(try r.data())
            case (12, 2):
                guard let u = UUID.parse(try r.string()) else { throw NotFast() }
                out = .uuid(u)
            case (13, 2): out = .uri(try r.string())
            default: throw NotFast()
            }
        }
        return out
    }

    /// A `google.protobuf.Timestamp` as seconds since 1970.
    private static func timestamp(_ r: inout WireReader) throws -> Double {
        var seconds: Int64 = 0, nanos: Int32 = 0
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 0): seconds = Int64(bitPattern: try r.varint())
            case (2, 0): nanos = Int32(truncatingIfNeeded: try r.varint())
            case (1...2, _): throw NotFast()
            default: try r.skip(wire)
            }
        }
        return Double(seconds) + Double(nanos) / 1e9
    }

    /// One `map<string, ObjectRefList>` entry.
    private static func relationshipEntry(_ r: inout WireReader) throws -> (String, [ObjectReference]) {
        var key = ""
        var refs: [ObjectReference]?
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): key = try r.string()
            case (2, 2):
                guard refs == nil else { throw NotFast() }
                var list = try r.message()
                var out: [ObjectReference] = []
                while let (f, w) = try list.tag() {
                    switch (f, w) {
                    case (1, 2):
                        var sub = try list.message()
                        out.append(try reference(&sub))
                    case (1, _): throw NotFast()
                    default: try list.skip(w)
                    }
                }
                refs = out
            case (1...2, _): throw NotFast()
            default: try r.skip(wire)
            }
        }
        return (key, refs ?? [])
    }

    /// An `ObjectRef` (oneof: the last given wins); the store check is the handler's.
    private static func reference(_ r: inout WireReader) throws -> ObjectReference {
        var out: ObjectReference?
        while let (field, wire) = try r.tag() {
            switch (field, wire) {
            case (1, 2): out = .temporary(try r.string())
            case (2, 2):
                guard let id = ObjectID(uri: try r.string()) else { throw NotFast() }
                out = .permanent(id)
            case (1...2, _): throw NotFast()
            default: try r.skip(wire)
            }
        }
        guard let out else { throw NotFast() }
        return out
    }
}

enum SaveEncoding {
    /// `Convert.saveResult(r, model:)` serialized, written directly (each object ID's URI once,
    /// no SwiftProtobuf maps). A result with resolved conflicts goes through `Convert`.
    static func saveResult(_ r: SaveResult, model: ModelInfo?) throws -> [UInt8] {
        guard r.resolvedConflicts.isEmpty else { return try Convert.saveResult(r, model: model).serializedBytes() }
        var w = ProtoWriter(capacity: 64 + 150 * (r.permanentIDs.count + r.versions.count + r.skipped.count))
        let token = r.token.bytes
        if !token.isEmpty { w.bytes(1, token) }
        if r.token.generation != 0 { w.int64(2, r.token.generation) }
        for (k, id) in r.permanentIDs { w.delimited(3) { $0.string(1, k); $0.objectID(2, id) } }
        for (id, v) in r.versions { w.delimited(4) { $0.objectID(1, id); $0.int64(2, v) } }
        for id in r.skipped { w.objectID(6, id) }
        if r.dryRun { w.bool(7, true) }
        if r.replayed { w.bool(8, true) }
        return w.finishBytes()
    }
}
