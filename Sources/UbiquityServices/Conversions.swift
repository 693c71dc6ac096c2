import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// What the services need to know of a model to convert values: every attribute's type per
/// entity (inherited ones included). Built once per model version and cached.
struct ModelInfo: Sendable {
    let definition: ModelDefinition
    let hash: String
    /// entity → attribute → type (with inherited attributes).
    let attributeTypes: [String: [String: AttributeType]]
    /// entity → relationship → to-many?
    let relationships: [String: [String: Bool]]
    /// entity → relationship → its inverse's name (relationships that have one).
    let inverses: [String: [String: String]]

    init(_ m: ModelDefinition, hash: String) {
        definition = m
        self.hash = hash
        let byName = Dictionary(m.entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var types: [String: [String: AttributeType]] = [:]
        var rels: [String: [String: Bool]] = [:]
        var invs: [String: [String: String]] = [:]
        for e in m.entities {
            var t: [String: AttributeType] = [:]
            var r: [String: Bool] = [:]
            var inv: [String: String] = [:]
            var cur: EntityDefinition? = e
            var seen = Set<String>()
            while let c = cur, seen.insert(c.name).inserted {
                for a in c.attributes where t[a.name] == nil { t[a.name] = a.type }
                for x in c.relationships where r[x.name] == nil { r[x.name] = x.toMany; inv[x.name] = x.inverse }
                cur = c.parent.flatMap { byName[$0] }
            }
            types[e.name] = t
            rels[e.name] = r
            invs[e.name] = inv
        }
        attributeTypes = types
        relationships = rels
        inverses = invs
    }

    func type(_ entity: String, _ attribute: String) -> AttributeType? { attributeTypes[entity]?[attribute] }
}

/// Converts between the protobuf messages and the engine's types. Conversion errors are
/// INVALID_ARGUMENT with the request field they came from.
enum Convert {
    // MARK: Values

    static func storageValue(_ v: Ubiquity_V1_Value, field: @autoclosure () -> String) throws -> StorageValue {
        switch v.kind {
        case .none, .nullValue: return .null
        case .stringValue(let s): return .string(s)
        case .boolValue(let b): return .bool(b)
        case .int16Value(let i), .int32Value(let i): return .int(Int64(i))
        case .int64Value(let i): return .int(i)
        case .floatValue(let f): return .double(Double(f))
        case .doubleValue(let d): return .double(d)
        case .decimalValue(let s):
            guard isDecimal(s) else {
                throw ServiceError.invalid(field(), "\"\(s)\" is not a decimal number (write it like \"12.50\")", reason: .badValue)
            }
            return .decimal(s)
        case .dateValue(let t): return .date(Double(t.seconds) + Double(t.nanos) / 1e9)
        case .binaryValue(let d): return .binary(d)
        case .uuidValue(let s):
            guard let u = UUID.parse(s) else {
                throw ServiceError.invalid(field(), "\"\(s)\" is not a UUID (expected e.g. 1b4e28ba-2fa1-11d2-883f-0016d3cca427)", reason: .badValue)
            }
            return .uuid(u)
        case .uriValue(let s): return .uri(s)
        }
    }

    /// Whether a `decimal_value` string is a decimal number the engine accepts.
    static func isDecimal(_ s: String) -> Bool {
        !s.isEmpty && Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) != nil
    }

    /// `field` is only evaluated for an error message.
    static func values(_ m: [String: Ubiquity_V1_Value], field: @autoclosure () -> String) throws -> [String: StorageValue] {
        // mapValues keeps the map's hash table (no rehash per key); on a failure, the loop finds
        // the first bad value in the same order as before, for its field name.
        if let out = try? m.mapValues({ try storageValue($0, field: "") }) { return out }
        var out: [String: StorageValue] = [:]
        for (k, v) in m { out[k] = try storageValue(v, field: "\(field()).\(k)") }
        return out
    }

    /// The protobuf value for a stored value; `type` picks the field for numbers.
    static func protoValue(_ v: StorageValue, type: AttributeType?) -> Ubiquity_V1_Value {
        var out = Ubiquity_V1_Value()
        switch v {
        case .null: out.kind = .nullValue(.nullValue)
        case .string(let s): out.kind = .stringValue(s)
        case .bool(let b): out.kind = .boolValue(b)
        case .int(let i):
            switch type {
            case .int16: out.kind = .int16Value(Int32(clamping: i))
            case .int32: out.kind = .int32Value(Int32(clamping: i))
            case .bool: out.kind = .boolValue(i != 0)
            case .double: out.kind = .doubleValue(Double(i))
            case .float: out.kind = .floatValue(Float(i))
            default: out.kind = .int64Value(i)
            }
        case .double(let d):
            switch type {
            case .float: out.kind = .floatValue(Float(d))
            case .int16, .int32, .int64: out.kind = .int64Value(int64(saturating: d))
            default: out.kind = .doubleValue(d)
            }
        case .decimal(let s): out.kind = .decimalValue(s)
        case .date(let d):
            var t = Google_Protobuf_Timestamp()
            (t.seconds, t.nanos) = timestamp(d)
            out.kind = .dateValue(t)
        case .binary(let d): out.kind = .binaryValue(d)
        case .uuid(let u): out.kind = .uuidValue(u.uuidString.lowercased())
        case .uri(let s): out.kind = .uriValue(s)
        }
        return out
    }

    /// A double stored under an integer attribute as the int64 a client is sent: truncated toward
    /// zero, saturated at Int64's bounds, NaN as 0. (A REAL can sit in an integer column — e.g.
    /// written before a migration changed the attribute's type, or by another SQLite client —
    /// and `Int64(d)` would trap on NaN, infinities and values out of range.) Both encoders
    /// (`protoValue`, `ObjectEncoding.value`) use it.
    @inline(__always)
    static func int64(saturating d: Double) -> Int64 {
        if d.isNaN { return 0 }
        if d >= 9_223_372_036_854_775_808.0 { return .max }  // 2^63
        if d <= -9_223_372_036_854_775_808.0 { return .min }
        return Int64(d)
    }

    /// A date (seconds since 1970) as a Timestamp's seconds and nanos: seconds rounded down,
    /// nanos in 0...999_999_999. Dates no Timestamp can hold (NaN, infinite, beyond Int64's
    /// seconds) saturate like `int64(saturating:)`, with nanos 0.
    @inline(__always)
    static func timestamp(_ d: Double) -> (seconds: Int64, nanos: Int32) {
        let secs = d.rounded(.down)
        guard secs > -9_223_372_036_854_775_808.0, secs < 9_223_372_036_854_775_808.0 else { return (int64(saturating: secs), 0) }
        return (Int64(secs), Int32(min(999_999_999, max(0, ((d - secs) * 1e9).rounded()))))
    }

    static func arguments(_ m: [String: Ubiquity_V1_Argument], field: String) throws -> [String: QueryArgument] {
        var out: [String: QueryArgument] = [:]
        for (k, a) in m {
            switch a.kind {
            case .value(let v): out[k] = .scalar(try storageValue(v, field: "\(field).\(k)"))
            case .list(let l): out[k] = .list(try l.values.map { try storageValue($0, field: "\(field).\(k)") })
            case .none: out[k] = .scalar(.null)
            }
        }
        return out
    }

    // MARK: Objects

    static func managedObject(_ o: ObjectSnapshot, model: ModelInfo?) -> Ubiquity_V1_ManagedObject {
        var m = Ubiquity_V1_ManagedObject()
        m.objectID = o.id.uri
        m.entity = o.id.entity
        m.version = o.version
        for (k, v) in o.values { m.values[k] = protoValue(v, type: model?.type(o.id.entity, k)) }
        for (k, ids) in o.relationships {
            var l = Ubiquity_V1_ObjectIDList()
            l.objectIds = ids.map(\.uri)
            m.relationships[k] = l
        }
        return m
    }

    /// `field` is built only for an error (callers name list elements, `object_ids[i]`: formatting
    /// that per ID was a string allocation per ID of every GetObjects).
    static func objectID(_ s: String, field: @autoclosure () -> String, store: UUID? = nil, allowTemporary: Bool = false) throws -> ObjectID {
        guard let id = ObjectID(uri: s, allowTemporary: allowTemporary) else {
            throw ServiceError.invalid(field(), "\"\(s.prefix(200))\" is not an object ID (expected x-ubiquity://<store-uuid>/<Entity>/p<pk>)", reason: .badObjectID)
        }
        if let store, id.storeID != store {
            throw ServiceError.invalid(field(), "\(s) belongs to another store", reason: .badObjectID)
        }
        return id
    }

    static func reference(_ r: Ubiquity_V1_ObjectRef, field: String, store: UUID) throws -> ObjectReference {
        switch r.ref {
        case .temporaryID(let t): return .temporary(t)
        case .objectID(let s): return .permanent(try objectID(s, field: field, store: store))
        case .none: throw ServiceError.invalid(field, "a relationship target needs temporary_id or object_id", reason: .badObjectID)
        }
    }

    static func references(_ m: [String: Ubiquity_V1_ObjectRefList], field: String, store: UUID) throws -> [String: [ObjectReference]] {
        var out: [String: [ObjectReference]] = [:]
        for (k, l) in m {
            out[k] = try l.refs.enumerated().map { try reference($0.element, field: "\(field).\(k)[\($0.offset)]", store: store) }
        }
        return out
    }

    static func insert(_ i: Ubiquity_V1_Insert, field: @autoclosure () -> String, store: UUID) throws -> InsertOperation {
        guard !i.temporaryID.isEmpty else { throw ServiceError.invalid("\(field()).temporary_id", "every insert needs a temporary_id (any label unique in the request)", reason: .missingField) }
        guard !i.entity.isEmpty else { throw ServiceError.invalid("\(field()).entity", "every insert needs an entity", reason: .missingField) }
        return InsertOperation(temporaryID: i.temporaryID, entity: i.entity,
                               values: try values(i.values, field: "\(field()).values"),
                               relationships: i.relationships.isEmpty ? [:] : try references(i.relationships, field: "\(field()).relationships", store: store))
    }

    static func update(_ u: Ubiquity_V1_Update, field: String, store: UUID) throws -> UpdateOperation {
        UpdateOperation(objectID: try objectID(u.objectID, field: "\(field).object_id", store: store),
                        expectedVersion: u.hasExpectedVersion ? u.expectedVersion : nil,
                        values: try values(u.values, field: "\(field).values"),
                        relationships: try references(u.relationships, field: "\(field).relationships", store: store),
                        snapshot: u.snapshot.isEmpty ? nil : try values(u.snapshot, field: "\(field).snapshot"))
    }

    static func delete(_ d: Ubiquity_V1_Delete, field: String, store: UUID) throws -> DeleteOperation {
        DeleteOperation(objectID: try objectID(d.objectID, field: "\(field).object_id", store: store),
                        expectedVersion: d.hasExpectedVersion ? d.expectedVersion : nil)
    }

    static func mergePolicy(_ p: Ubiquity_V1_MergePolicy) throws -> MergePolicy {
        switch p {
        case .unspecified, .error: .error
        case .mergeByPropertyStoreTrump: .mergeByPropertyStoreTrump
        case .mergeByPropertyObjectTrump: .mergeByPropertyObjectTrump
        case .overwrite: .overwrite
        case .rollback: .rollback
        case .UNRECOGNIZED(let n): throw ServiceError.invalid("merge_policy", "unknown merge policy \(n)", reason: .badEnum)
        }
    }

    static func protoMergePolicy(_ p: MergePolicy) -> Ubiquity_V1_MergePolicy {
        switch p {
        case .error: .error
        case .mergeByPropertyStoreTrump: .mergeByPropertyStoreTrump
        case .mergeByPropertyObjectTrump: .mergeByPropertyObjectTrump
        case .overwrite: .overwrite
        case .rollback: .rollback
        }
    }

    static func conflict(_ c: ConflictRecord, model: ModelInfo?) -> Ubiquity_V1_ConflictRecord {
        var r = Ubiquity_V1_ConflictRecord()
        switch c.kind {
        case .versionChanged: r.kind = .versionChanged
        case .deletedInStore: r.kind = .deletedInStore
        case .uniquenessClash: r.kind = .uniquenessClash
        }
        r.objectID = c.objectID?.uri ?? ""
        r.temporaryID = c.temporaryID ?? ""
        r.entity = c.entity
        let t = { (k: String) in model?.type(c.entity, k) }
        for (k, v) in c.clientSnapshot { r.clientSnapshot[k] = protoValue(v, type: t(k)) }
        for (k, v) in c.clientChanges { r.clientChanges[k] = protoValue(v, type: t(k)) }
        for (k, v) in c.storeValues { r.storeValues[k] = protoValue(v, type: t(k)) }
        r.clientVersion = c.clientVersion
        r.storeVersion = c.storeVersion
        r.constraint = c.constraint
        return r
    }

    /// A save's outcome: the result, or (conflicts_in_response) the refused conflicts in full.
    static func saveResult(_ o: SaveOutcome, model: ModelInfo?) -> Ubiquity_V1_SaveResult {
        switch o {
        case .saved(let r): return saveResult(r, model: model)
        case .conflicted(let conflicts, let token):
            var r = Ubiquity_V1_SaveResult()
            r.token = Data(token.bytes)
            r.generation = token.generation
            r.unresolvedConflicts = conflicts.map { conflict($0, model: model) }
            return r
        }
    }

    static func saveResult(_ s: SaveResult, model: ModelInfo?) -> Ubiquity_V1_SaveResult {
        var r = Ubiquity_V1_SaveResult()
        r.token = Data(s.token.bytes)
        r.generation = s.token.generation
        var ids = [String: String](minimumCapacity: s.permanentIDs.count)
        for (k, v) in s.permanentIDs { ids[k] = v.uri }
        r.permanentIds = ids
        var versions = [String: Int64](minimumCapacity: s.versions.count)
        for (k, v) in s.versions { versions[k.uri] = v }
        r.versions = versions
        r.resolvedConflicts = s.resolvedConflicts.map { conflict($0, model: model) }
        r.skippedObjectIds = s.skipped.map(\.uri)
        r.dryRun = s.dryRun
        r.replayed = s.replayed
        return r
    }

    // MARK: Fetch

    static func fetchRequest(_ f: Ubiquity_V1_FetchSpec, field: String) throws -> FetchRequest {
        guard !f.entity.isEmpty else { throw ServiceError.invalid("\(field).entity", "a fetch needs an entity", reason: .missingField) }
        guard f.fetchLimit >= 0, f.fetchOffset >= 0, f.fetchBatchSize >= 0 else {
            throw ServiceError.invalid(field, "fetch_limit, fetch_offset and fetch_batch_size cannot be negative", reason: .badValue)
        }
        var r = FetchRequest(entity: f.entity)
        r.predicate = f.predicate.nonEmpty
        r.variables = try arguments(f.variables, field: "\(field).variables")
        r.sortDescriptors = f.sortDescriptors.map { SortDescriptor(keyPath: $0.keyPath, ascending: !$0.descending, caseInsensitive: $0.caseInsensitive) }
        r.fetchLimit = Int(f.fetchLimit)
        r.fetchOffset = Int(f.fetchOffset)
        r.fetchBatchSize = Int(f.fetchBatchSize)
        switch f.resultType {
        case .unspecified, .objects: r.resultType = .objects
        case .objectIds: r.resultType = .objectIDs
        case .dictionaries: r.resultType = .dictionaries
        case .count: r.resultType = .count
        case .UNRECOGNIZED(let n): throw ServiceError.invalid("\(field).result_type", "unknown result type \(n)", reason: .badEnum)
        }
        r.propertiesToFetch = f.propertiesToFetch
        r.propertiesToGroupBy = f.propertiesToGroupBy
        r.havingPredicate = f.havingPredicate.nonEmpty
        r.returnsDistinctResults = f.returnsDistinctResults
        r.relationshipKeyPathsForPrefetching = f.relationshipKeyPathsForPrefetching
        r.includesSubentities = !f.excludesSubentities
        return r
    }

    static func fetchResults(_ r: FetchResult, type: FetchResultType, model: ModelInfo?) -> Ubiquity_V1_FetchResults {
        var out = Ubiquity_V1_FetchResults()
        out.token = Data(r.token.bytes)
        out.count = Int64(r.count)
        switch type {
        case .objects:
            out.objects = r.objects.map { managedObject($0, model: model) }
            out.objectIds = out.objects.map(\.objectID)
        case .objectIDs:
            out.objectIds = r.objectIDs.map(\.uri)
        case .dictionaries:
            // Dictionary keys are key paths or aliases: type numbers by the attribute when the key
            // names one of the fetched entity's attributes.
            out.rows = r.dictionaries.map { d in
                var row = Ubiquity_V1_Row()
                for (k, v) in d { row.values[k] = protoValue(v, type: nil) }
                return row
            }
        case .count:
            break
        }
        out.prefetched = r.prefetched.map { managedObject($0, model: model) }
        return out
    }

    static func readGeneration(_ g: Ubiquity_V1_ReadGeneration, field: String) throws -> (ReadGeneration, Int64?) {
        let at: ReadGeneration
        if g.token.isEmpty { at = .current } else {
            do { at = .token(try GenerationToken(bytes: Array(g.token))) } catch {
                throw ServiceError.invalid("\(field).token", "malformed generation token: pass back the token bytes a response gave you", reason: .badToken)
            }
        }
        return (at, g.minimumGeneration > 0 ? g.minimumGeneration : nil)
    }

    static func token(_ bytes: Data, field: String) throws -> GenerationToken {
        do { return try GenerationToken(bytes: Array(bytes)) } catch {
            throw ServiceError.invalid(field, "malformed generation token: pass back the token bytes a response gave you", reason: .badToken)
        }
    }

    // MARK: Models

    static func attributeType(_ t: Ubiquity_V1_AttributeType, field: String) throws -> AttributeType {
        switch t {
        case .string: .string
        case .bool: .bool
        case .int16: .int16
        case .int32: .int32
        case .int64: .int64
        case .float: .float
        case .double: .double
        case .decimal: .decimal
        case .date: .date
        case .binary: .binary
        case .uuid: .uuid
        case .uri: .uri
        case .unspecified, .UNRECOGNIZED:
            throw ServiceError.invalid(field, "every attribute needs a type (ATTRIBUTE_TYPE_STRING, …)", reason: .badEnum)
        }
    }

    static func protoAttributeType(_ t: AttributeType) -> Ubiquity_V1_AttributeType {
        switch t {
        case .string: .string
        case .bool: .bool
        case .int16: .int16
        case .int32: .int32
        case .int64: .int64
        case .float: .float
        case .double: .double
        case .decimal: .decimal
        case .date: .date
        case .binary: .binary
        case .uuid: .uuid
        case .uri: .uri
        }
    }

    static func model(_ m: Ubiquity_V1_Model) throws -> ModelDefinition {
        var entities: [EntityDefinition] = []
        for (ei, e) in m.entities.enumerated() {
            let ef = "model.entities[\(ei)]"
            var attrs: [AttributeDefinition] = []
            for (ai, a) in e.attributes.enumerated() {
                let af = "\(ef).attributes[\(ai)]"
                let type = try attributeType(a.type, field: "\(af).type")
                attrs.append(AttributeDefinition(
                    name: a.name, type: type, optional: !a.required,
                    defaultValue: a.hasDefaultValue ? try storageValue(a.defaultValue, field: "\(af).default_value") : nil,
                    minimum: a.hasMinimum ? a.minimum : nil, maximum: a.hasMaximum ? a.maximum : nil,
                    keepOnDelete: a.keepOnDelete, renamingIdentifier: a.renamingIdentifier.nonEmpty))
            }
            var rels: [RelationshipDefinition] = []
            for (ri, r) in e.relationships.enumerated() {
                let rule: DeleteRule
                switch r.deleteRule {
                case .unspecified, .nullify: rule = .nullify
                case .cascade: rule = .cascade
                case .deny: rule = .deny
                case .noAction: rule = .noAction
                case .UNRECOGNIZED(let n): throw ServiceError.invalid("\(ef).relationships[\(ri)].delete_rule", "unknown delete rule \(n)", reason: .badEnum)
                }
                rels.append(RelationshipDefinition(
                    name: r.name, destination: r.destination, toMany: r.toMany, inverse: r.inverse.nonEmpty,
                    deleteRule: rule, optional: !r.required, minCount: r.minCount > 0 ? Int(r.minCount) : nil,
                    maxCount: r.maxCount > 0 ? Int(r.maxCount) : nil, renamingIdentifier: r.renamingIdentifier.nonEmpty))
            }
            entities.append(EntityDefinition(
                name: e.name, parent: e.parent.nonEmpty, isAbstract: e.isAbstract, attributes: attrs,
                relationships: rels, indexes: e.indexes.map(\.properties), uniquenessConstraints: e.uniquenessConstraints.map(\.properties),
                renamingIdentifier: e.renamingIdentifier.nonEmpty))
        }
        return ModelDefinition(versionIdentifier: m.versionIdentifier.nonEmpty, entities: entities)
    }

    static func protoModel(_ m: ModelDefinition) -> Ubiquity_V1_Model {
        var out = Ubiquity_V1_Model()
        out.versionIdentifier = m.versionIdentifier ?? ""
        out.entities = m.entities.map { e in
            var pe = Ubiquity_V1_Entity()
            pe.name = e.name
            pe.parent = e.parent ?? ""
            pe.isAbstract = e.isAbstract
            pe.attributes = e.attributes.map { a in
                var pa = Ubiquity_V1_Attribute()
                pa.name = a.name
                pa.type = protoAttributeType(a.type)
                pa.required = !a.optional
                if let d = a.defaultValue { pa.defaultValue = protoValue(d, type: a.type) }
                if let v = a.minimum { pa.minimum = v }
                if let v = a.maximum { pa.maximum = v }
                pa.keepOnDelete = a.keepOnDelete
                pa.renamingIdentifier = a.renamingIdentifier ?? ""
                return pa
            }
            pe.relationships = e.relationships.map { r in
                var pr = Ubiquity_V1_Relationship()
                pr.name = r.name
                pr.destination = r.destination
                pr.toMany = r.toMany
                pr.inverse = r.inverse ?? ""
                switch r.deleteRule {
                case .nullify: pr.deleteRule = .nullify
                case .cascade: pr.deleteRule = .cascade
                case .deny: pr.deleteRule = .deny
                case .noAction: pr.deleteRule = .noAction
                }
                pr.required = !r.optional
                pr.minCount = Int32(r.minCount ?? 0)
                pr.maxCount = Int32(r.maxCount ?? 0)
                pr.renamingIdentifier = r.renamingIdentifier ?? ""
                return pr
            }
            pe.indexes = e.indexes.map { var l = Ubiquity_V1_PropertyList(); l.properties = $0; return l }
            pe.uniquenessConstraints = e.uniquenessConstraints.map { var l = Ubiquity_V1_PropertyList(); l.properties = $0; return l }
            pe.renamingIdentifier = e.renamingIdentifier ?? ""
            return pe
        }
        return out
    }
}
