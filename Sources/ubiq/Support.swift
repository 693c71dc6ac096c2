import ArgumentParser
import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityProtos

/// Connection options shared by every subcommand.
struct ServerOptions: ParsableArguments {
    @Option(name: .long, help: "ubiquityd address as HOST:PORT (or set UBIQ_SERVER).")
    var server: String = ProcessInfo.processInfo.environment["UBIQ_SERVER"] ?? "127.0.0.1:50051"

    @Option(name: .long, help: "Model version hash this client was built with (sent as ubiquity-model-version).")
    var modelVersion: String?

    @Option(name: .long, help: "Seconds before a call gives up.")
    var timeout: Double = 30

    @OptionGroup var tls: TLSOptions

    /// HOST:PORT, an IPv6 host in brackets.
    static func address(_ server: String) throws -> (host: String, port: Int) {
        guard let colon = server.lastIndex(of: ":"), let port = Int(server[server.index(after: colon)...]) else {
            throw ValidationError("--server must be HOST:PORT, e.g. 127.0.0.1:50051")
        }
        var host = String(server[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }

    @Option(name: .long, help: "Session token to send (or set UBIQ_TOKEN). Without one, ubiq signs in to a local server's default account with its operator key (--data-dir).")
    var token: String?

    @Option(name: .long, help: "A local server's data directory: ubiq reads its operator.key when no --token is given (or set UBIQ_DATA_DIR).")
    var dataDir: String = ProcessInfo.processInfo.environment["UBIQ_DATA_DIR"] ?? "./data"

    func connect(authenticate: Bool = true) async throws -> Session {
        let (host, port) = try Self.address(server)
        let tlsContext = try tls.context()
        var session: Session
        do {
            session = Session(channel: try await GRPCChannel(host: host, port: port, tls: tlsContext), options: self)
        } catch {
            throw CLIError("cannot reach ubiquityd at \(server): \(error) (is it running? ./scripts/run starts one)")
        }
        if authenticate {
            var token = self.token ?? ProcessInfo.processInfo.environment["UBIQ_TOKEN"]
            if token == nil { token = try await LocalSignIn(session: session, dataDir: dataDir, host: host).token() }
            session.credentials = [("authorization", "Bearer " + (token ?? ""))]
        }
        return session
    }
}

/// An error printed as is, exit status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// One connection and the calls the commands make.
struct Session {
    let channel: GRPCChannel
    let options: ServerOptions
    /// `authorization`, once signed in.
    var credentials: [(String, String)] = []

    var metadata: [(String, String)] { credentials + (options.modelVersion.map { [("ubiquity-model-version", $0)] } ?? []) }

    func unary<Req: Message, Res: Message>(_ method: String, _ request: Req, _ type: Res.Type) async throws -> Res {
        do {
            return try await channel.unary("/ubiquity.v1." + method, request, as: type, metadata: metadata, timeout: options.timeout)
        } catch let e as RPCError {
            throw CLIError(Self.describe(e))
        }
    }

    /// `timeout: nil` for a stream that lasts until the user stops it (`ubiq watch`).
    func stream<Req: Message, Res: Message>(_ method: String, _ request: Req, _ type: Res.Type,
                                            timeout: Double?? = .none) -> AsyncThrowingStream<Res, Error> {
        channel.serverStreaming("/ubiquity.v1." + method, request, as: type, metadata: metadata,
                                timeout: timeout ?? options.timeout)
    }

    /// The store's ID by name (opened, created if `create`).
    func store(_ name: String, create: Bool = false) async throws -> Ubiquity_V1_StoreInfo {
        var r = Ubiquity_V1_OpenStoreRequest()
        r.name = name
        r.mustExist = !create
        return try await unary("Stores/OpenStore", r, Ubiquity_V1_OpenStoreResponse.self).store
    }

    func model(_ storeID: String) async throws -> ModelTypes {
        var r = Ubiquity_V1_GetModelRequest()
        r.storeID = storeID
        let m = try await unary("Models/GetModel", r, Ubiquity_V1_GetModelResponse.self)
        guard m.hasModel else { throw CLIError("the store has no model yet: register one with `ubiq model register`") }
        return ModelTypes(m.model)
    }

    /// "CODE: message", then the google.rpc.Status details a person needs.
    static func describe(_ e: RPCError) -> String {
        var lines = ["\(e.code): \(e.message)"]
        if let bytes = e.details, let status = try? Google_Rpc_Status(serializedBytes: bytes) {
            for any in status.details {
                if let info = try? Google_Rpc_ErrorInfo(unpackingAny: any) {
                    lines.append("  reason: \(info.reason)")
                } else if let br = try? Google_Rpc_BadRequest(unpackingAny: any) {
                    for v in br.fieldViolations { lines.append("  \(v.field): \(v.description_p)") }
                } else if let kc = try? Ubiquity_V1_KeyValueConflictDetails(unpackingAny: any) {
                    lines.append("  key \(kc.key): \(kc.exists ? "at version \(kc.currentVersion)" : "not set (version \(kc.currentVersion))")")
                } else if let q = try? Ubiquity_V1_KeyValueQuotaDetails(unpackingAny: any) {
                    lines.append("  quota \(q.quota): limit \(q.limit), requested \(q.requested), used \(q.used)")
                } else if let cd = try? Ubiquity_V1_ConflictDetails(unpackingAny: any) {
                    for c in cd.conflicts {
                        lines.append("  conflict on \(c.objectID.isEmpty ? c.temporaryID : c.objectID): your version \(c.clientVersion), store version \(c.storeVersion)")
                        for (k, v) in c.storeValues.sorted(by: { $0.key < $1.key }) { lines.append("    store \(k) = \(JSONValues.display(v))") }
                    }
                }
            }
        }
        return lines.joined(separator: "\n")
    }
}

/// Attribute types of a model, to turn plain JSON into typed values.
struct ModelTypes {
    let model: Ubiquity_V1_Model
    var attributes: [String: [String: Ubiquity_V1_AttributeType]] = [:]
    var relationships: [String: Set<String>] = [:]

    init(_ m: Ubiquity_V1_Model) {
        model = m
        let byName = Dictionary(m.entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for e in m.entities {
            var cur: Ubiquity_V1_Entity? = e
            var seen = Set<String>()
            while let c = cur, seen.insert(c.name).inserted {
                for a in c.attributes where attributes[e.name]?[a.name] == nil { attributes[e.name, default: [:]][a.name] = a.type }
                for r in c.relationships { relationships[e.name, default: []].insert(r.name) }
                cur = c.parent.isEmpty ? nil : byName[c.parent]
            }
            if attributes[e.name] == nil { attributes[e.name] = [:] }
        }
    }

    func check(entity: String) throws -> [String: Ubiquity_V1_AttributeType] {
        guard let a = attributes[entity] else {
            throw CLIError("no entity \(entity) in the model (entities: \(attributes.keys.sorted().joined(separator: ", ")))")
        }
        return a
    }
}

/// Plain JSON ↔ typed `Value`s, guided by the model.
enum JSONValues {
    static func parse(_ text: String, what: String) throws -> Any {
        do { return try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) } catch {
            throw CLIError("\(what) is not valid JSON: \(error.localizedDescription)")
        }
    }

    static func readFile(_ path: String) throws -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch { throw CLIError("cannot read \(path): \(error.localizedDescription)") }
    }

    static func value(_ x: Any, type: Ubiquity_V1_AttributeType, name: String) throws -> Ubiquity_V1_Value {
        var v = Ubiquity_V1_Value()
        if x is NSNull { v.nullValue = .nullValue; return v }
        func bad() -> CLIError { CLIError("\(name): \(x) is not a valid \(type) value") }
        switch type {
        case .string: guard let s = x as? String else { throw bad() }; v.stringValue = s
        case .bool: guard let b = x as? Bool else { throw bad() }; v.boolValue = b
        case .int16: guard let n = x as? NSNumber else { throw bad() }; v.int16Value = n.int32Value
        case .int32: guard let n = x as? NSNumber else { throw bad() }; v.int32Value = n.int32Value
        case .int64: guard let n = x as? NSNumber else { throw bad() }; v.int64Value = n.int64Value
        case .float: guard let n = x as? NSNumber else { throw bad() }; v.floatValue = n.floatValue
        case .double: guard let n = x as? NSNumber else { throw bad() }; v.doubleValue = n.doubleValue
        case .decimal:
            if let s = x as? String { v.decimalValue = s } else if let n = x as? NSNumber { v.decimalValue = n.stringValue } else { throw bad() }
        case .date:
            var t = Google_Protobuf_Timestamp()
            if let n = x as? NSNumber {
                t = Google_Protobuf_Timestamp(roundingTimeIntervalSince1970: n.doubleValue, rule: .toNearestOrAwayFromZero)
            } else if let s = x as? String, let d = ISO8601DateFormatter().date(from: s) {
                t = Google_Protobuf_Timestamp(date: d)
            } else { throw CLIError("\(name): a date is an ISO 8601 string (2026-11-22T10:00:00Z) or seconds since 1970") }
            v.dateValue = t
        case .binary: guard let s = x as? String, let d = Data(base64Encoded: s) else { throw CLIError("\(name): binary values are base64 strings") }; v.binaryValue = d
        case .uuid: guard let s = x as? String else { throw bad() }; v.uuidValue = s
        case .uri: guard let s = x as? String else { throw bad() }; v.uriValue = s
        case .unspecified, .UNRECOGNIZED: throw bad()
        }
        return v
    }

    /// Attribute values from a JSON object, typed by the entity's attributes.
    static func values(_ obj: [String: Any], entity: String, model: ModelTypes, skip: Set<String> = []) throws -> [String: Ubiquity_V1_Value] {
        let types = try model.check(entity: entity)
        var out: [String: Ubiquity_V1_Value] = [:]
        for (k, x) in obj where !skip.contains(k) {
            guard let t = types[k] else {
                throw CLIError("\(entity) has no attribute \(k) (attributes: \(types.keys.sorted().joined(separator: ", ")))")
            }
            out[k] = try value(x, type: t, name: "\(entity).\(k)")
        }
        return out
    }

    /// `{"rel": ["x-ubiquity://…", {"temporary": "t1"}]}` → relationship targets.
    static func relationships(_ x: Any?, entity: String, model: ModelTypes) throws -> [String: Ubiquity_V1_ObjectRefList] {
        guard let obj = x as? [String: Any] else { return [:] }
        var out: [String: Ubiquity_V1_ObjectRefList] = [:]
        for (name, targets) in obj {
            guard model.relationships[entity]?.contains(name) == true else { throw CLIError("\(entity) has no relationship \(name)") }
            let list = (targets as? [Any]) ?? (targets is NSNull ? [] : [targets])
            var refs = Ubiquity_V1_ObjectRefList()
            for t in list {
                var r = Ubiquity_V1_ObjectRef()
                if let s = t as? String { r.objectID = s } else if let o = t as? [String: Any], let tmp = o["temporary"] as? String { r.temporaryID = tmp } else {
                    throw CLIError("\(entity).\(name): a target is an object ID string or {\"temporary\": \"label\"}")
                }
                refs.refs.append(r)
            }
            out[name] = refs
        }
        return out
    }

    static func plain(_ v: Ubiquity_V1_Value) -> Any {
        switch v.kind {
        case .none, .nullValue: NSNull()
        case .stringValue(let s): s
        case .boolValue(let b): b
        case .int16Value(let i), .int32Value(let i): i
        case .int64Value(let i): i
        case .floatValue(let f): Double(f)
        case .doubleValue(let d): d
        case .decimalValue(let s): s
        case .dateValue(let t): ISO8601DateFormatter().string(from: t.date)
        case .binaryValue(let d): d.base64EncodedString()
        case .uuidValue(let s): s
        case .uriValue(let s): s
        }
    }

    static func display(_ v: Ubiquity_V1_Value) -> String {
        let p = plain(v)
        if p is NSNull { return "nil" }
        if let s = p as? String, case .stringValue = v.kind { return s }
        return "\(p)"
    }

    static func object(_ o: Ubiquity_V1_ManagedObject) -> [String: Any] {
        [
            "objectID": o.objectID, "entity": o.entity, "version": o.version,
            "values": o.values.mapValues(plain),
            "relationships": o.relationships.mapValues { $0.objectIds },
        ]
    }

    static func printJSON(_ x: Any) throws {
        let d = try JSONSerialization.data(withJSONObject: x, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: d, as: UTF8.self))
    }
}

enum Hex {
    static func encode(_ d: Data) -> String { d.map { String(format: "%02x", $0) }.joined() }
    static func decode(_ s: String) throws -> Data {
        var out = Data()
        var it = s.makeIterator()
        while let a = it.next() {
            guard let b = it.next(), let byte = UInt8(String([a, b]), radix: 16) else { throw CLIError("\(s) is not a hex token (copy it from `ubiq generation`)") }
            out.append(byte)
        }
        return out
    }
}
