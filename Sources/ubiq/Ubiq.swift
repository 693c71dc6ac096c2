import ArgumentParser
import Foundation
import SwiftProtobuf
import UbiquityProtos

@main
struct Ubiq: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ubiq",
        abstract: "Command-line client for ubiquityd: models, stores, objects, fetches, the change feed, the key-value store.",
        discussion: """
            Values are plain JSON, typed by the store's model (dates: ISO 8601 or seconds since 1970; \
            binary: base64). Stores are named; `ubiq store open NAME` creates one.
            """,
        subcommands: [StoreCommand.self, ModelCommand.self, Insert.self, Update.self, Delete.self, Fetch.self, SaveBatch.self, Generation.self,
                      Watch.self, History.self, KeyValueCommand.self, AccountCommand.self, AdminCommand.self, Health.self])
}

struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "store", abstract: "Open (create) and list stores.",
                                                    subcommands: [Open.self, List.self])
    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Open a store by name, creating it if missing.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The store's name.") var name: String
        func run() async throws {
            let s = try await server.connect()
            let info = try await s.store(name, create: true)
            print("store \(info.name)  id \(info.storeID)  generation \(info.generation)  model \(info.modelVersionHash.isEmpty ? "(none yet)" : String(info.modelVersionHash.prefix(16)) + "…")")
        }
    }
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the account's stores.")
        @OptionGroup var server: ServerOptions
        func run() async throws {
            let s = try await server.connect()
            let r = try await s.unary("Stores/ListStores", Ubiquity_V1_ListStoresRequest(), Ubiquity_V1_ListStoresResponse.self)
            for st in r.stores { print("\(st.storeID)  \(st.name)") }
        }
    }
}

struct ModelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "model", abstract: "Register and show a store's model.",
                                                    subcommands: [Register.self, Show.self])
    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a model version from a JSON file (the protobuf JSON of ubiquity.v1.Model; see examples/).",
            discussion: "A new version of an existing model runs a lightweight migration; --dry-run previews it.")
        @OptionGroup var server: ServerOptions
        @Option(help: "The store's name.") var store: String
        @Flag(help: "Show the migration without applying it.") var dryRun = false
        @Argument(help: "Model JSON file.") var file: String
        func run() async throws {
            var options = JSONDecodingOptions()
            options.ignoreUnknownFields = false
            let model: Ubiquity_V1_Model
            do { model = try Ubiquity_V1_Model(jsonString: try JSONValues.readFile(file), options: options) } catch let e as CLIError { throw e } catch {
                throw CLIError("\(file) is not a ubiquity.v1.Model in JSON: \(error)")
            }
            let s = try await server.connect()
            let info = try await s.store(store, create: true)
            var r = Ubiquity_V1_RegisterModelRequest()
            r.storeID = info.storeID
            r.model = model
            r.dryRun = dryRun
            let res = try await s.unary("Models/RegisterModel", r, Ubiquity_V1_RegisterModelResponse.self)
            if res.unchanged { print("model unchanged (version \(res.versionHash.prefix(16))…)"); return }
            print(res.dryRun ? "would migrate:" : "registered model \(res.versionHash)")
            for step in res.steps { print("  - \(step)") }
        }
    }
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the store's model as JSON, with its version hash.")
        @OptionGroup var server: ServerOptions
        @Option(help: "The store's name.") var store: String
        func run() async throws {
            let s = try await server.connect()
            let info = try await s.store(store)
            var r = Ubiquity_V1_GetModelRequest()
            r.storeID = info.storeID
            let m = try await s.unary("Models/GetModel", r, Ubiquity_V1_GetModelResponse.self)
            guard m.hasModel else { print("(no model yet)"); return }
            print("version hash: \(m.versionHash)")
            try JSONValues.printJSON(try JSONValues.parse(try m.model.jsonString(), what: "the model"))
        }
    }
}

struct Insert: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Insert objects from JSON (one object or an array), in one save.",
                                                    discussion: "Example: ubiq insert --store notes --entity Person --json '{\"name\": \"Ann\", \"age\": 31}'")
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    @Option(help: "The entity.") var entity: String
    @Option(help: "The object(s) as JSON.") var json: String?
    @Option(help: "A file holding the object(s) as JSON.") var file: String?
    func run() async throws {
        guard (json == nil) != (file == nil) else { throw ValidationError("give --json or --file") }
        let parsed = try JSONValues.parse(json ?? JSONValues.readFile(file!), what: "the objects")
        let objects: [[String: Any]]
        if let one = parsed as? [String: Any] { objects = [one] } else if let many = parsed as? [[String: Any]] { objects = many } else {
            throw CLIError("objects are a JSON object or an array of objects")
        }
        let s = try await server.connect()
        let info = try await s.store(store)
        let model = try await s.model(info.storeID)
        var req = Ubiquity_V1_SaveRequest()
        req.storeID = info.storeID
        req.author = "ubiq"
        for (i, o) in objects.enumerated() {
            var ins = Ubiquity_V1_Insert()
            ins.temporaryID = "\(i)"
            ins.entity = entity
            ins.values = try JSONValues.values(o, entity: entity, model: model, skip: ["relationships"])
            ins.relationships = try JSONValues.relationships(o["relationships"], entity: entity, model: model)
            req.inserts.append(ins)
        }
        let r = try await s.unary("Stores/Save", req, Ubiquity_V1_SaveResult.self)
        for i in 0..<objects.count { print(r.permanentIds["\(i)"] ?? "?") }
        print("generation \(r.generation)")
    }
}

struct Update: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change attribute values of one object.",
                                                    discussion: "Example: ubiq update --store notes x-ubiquity://…/Person/p1 --json '{\"age\": 32}'")
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    @Option(help: "Fail with a conflict unless the object is still at this version.") var expectedVersion: Int64?
    @Option(help: "The changed values as JSON.") var json: String
    @Argument(help: "The object's ID.") var objectID: String
    func run() async throws {
        guard let obj = try JSONValues.parse(json, what: "--json") as? [String: Any] else { throw CLIError("--json must be a JSON object") }
        guard let entity = objectID.split(separator: "/").dropLast().last.map(String.init) else { throw CLIError("\(objectID) is not an object ID") }
        let s = try await server.connect()
        let info = try await s.store(store)
        let model = try await s.model(info.storeID)
        var u = Ubiquity_V1_Update()
        u.objectID = objectID
        if let v = expectedVersion { u.expectedVersion = v }
        u.values = try JSONValues.values(obj, entity: entity, model: model, skip: ["relationships"])
        u.relationships = try JSONValues.relationships(obj["relationships"], entity: entity, model: model)
        var req = Ubiquity_V1_SaveRequest()
        req.storeID = info.storeID
        req.author = "ubiq"
        req.updates = [u]
        let r = try await s.unary("Stores/Save", req, Ubiquity_V1_SaveResult.self)
        print("updated \(objectID) → version \(r.versions[objectID] ?? 0), generation \(r.generation)")
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete objects by ID (delete rules apply), in one save.")
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    @Argument(help: "Object IDs.") var objectIDs: [String]
    func run() async throws {
        guard !objectIDs.isEmpty else { throw ValidationError("name at least one object ID") }
        let s = try await server.connect()
        let info = try await s.store(store)
        var req = Ubiquity_V1_SaveRequest()
        req.storeID = info.storeID
        req.author = "ubiq"
        req.deletes = objectIDs.map { var d = Ubiquity_V1_Delete(); d.objectID = $0; return d }
        let r = try await s.unary("Stores/Save", req, Ubiquity_V1_SaveResult.self)
        print("deleted \(objectIDs.count) object\(objectIDs.count == 1 ? "" : "s"), generation \(r.generation)")
    }
}

struct Fetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch objects with a predicate (NSPredicate format), as a table or JSON.",
        discussion: "Example: ubiq fetch --store notes --entity Person --predicate 'age > 30 AND name BEGINSWITH[c] \"a\"' --sort name")
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    @Option(help: "The entity.") var entity: String
    @Option(help: "A predicate, e.g. 'age >= 18'.") var predicate: String = ""
    @Option(help: "Sort key path; append :desc for descending, :ci for case-insensitive (repeatable).") var sort: [String] = []
    @Option(help: "At most this many objects.") var limit: Int32 = 0
    @Option(help: "Skip this many objects.") var offset: Int32 = 0
    @Option(help: "Read at this generation token (hex, from `ubiq generation`).") var at: String?
    @Flag(help: "Print only the number of matching objects.") var count = false
    @Flag(help: "Print JSON instead of a table.") var json = false
    func run() async throws {
        let s = try await server.connect()
        let info = try await s.store(store)
        var spec = Ubiquity_V1_FetchSpec()
        spec.entity = entity
        spec.predicate = predicate
        spec.fetchLimit = limit
        spec.fetchOffset = offset
        spec.resultType = count ? .count : .objects
        spec.sortDescriptors = sort.map { k in
            var d = Ubiquity_V1_SortDescriptor()
            let parts = k.split(separator: ":")
            d.keyPath = String(parts.first ?? "")
            d.descending = parts.contains("desc")
            d.caseInsensitive = parts.contains("ci")
            return d
        }
        var req = Ubiquity_V1_FetchRequest()
        req.storeID = info.storeID
        req.fetch = spec
        if let at { req.at.token = try Hex.decode(at) }
        let r = try await s.unary("Stores/Fetch", req, Ubiquity_V1_FetchResults.self)
        if count { print(r.count); return }
        if json {
            try JSONValues.printJSON(["token": Hex.encode(r.token), "objects": r.objects.map(JSONValues.object)])
            return
        }
        Table.print(r.objects)
        FileHandle.standardError.write(Data("\(r.objects.count) object\(r.objects.count == 1 ? "" : "s") at token \(Hex.encode(r.token))\n".utf8))
    }
}

struct SaveBatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "save",
        abstract: "Save a batch of inserts, updates and deletes from a JSON file, atomically.",
        discussion: """
            The file: {"inserts": [{"temporaryID": "a", "entity": "Person", "values": {...}, "relationships": {"notes": [{"temporary": "n"}]}}],
            "updates": [{"objectID": "x-ubiquity://…", "expectedVersion": 1, "values": {...}}], "deletes": ["x-ubiquity://…"]}
            """)
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    @Option(help: "error, storeTrump, objectTrump, overwrite or rollback.") var mergePolicy = "error"
    @Option(help: "A client transaction ID: retrying with the same ID never applies twice.") var transactionID: String?
    @Flag(help: "Validate and check conflicts only.") var dryRun = false
    @Argument(help: "The batch JSON file.") var file: String
    func run() async throws {
        guard let batch = try JSONValues.parse(JSONValues.readFile(file), what: file) as? [String: Any] else { throw CLIError("\(file) must hold a JSON object") }
        let policies: [String: Ubiquity_V1_MergePolicy] = ["error": .error, "storeTrump": .mergeByPropertyStoreTrump, "objectTrump": .mergeByPropertyObjectTrump,
                                                          "overwrite": .overwrite, "rollback": .rollback]
        guard let policy = policies[mergePolicy] else { throw ValidationError("--merge-policy must be one of \(policies.keys.sorted().joined(separator: ", "))") }
        let s = try await server.connect()
        let info = try await s.store(store)
        let model = try await s.model(info.storeID)
        var req = Ubiquity_V1_SaveRequest()
        req.storeID = info.storeID
        req.mergePolicy = policy
        req.dryRun = dryRun
        req.author = "ubiq"
        if let t = transactionID { req.clientTransactionID = t }
        for case let i as [String: Any] in batch["inserts"] as? [Any] ?? [] {
            guard let entity = i["entity"] as? String, let tid = i["temporaryID"] as? String else { throw CLIError("every insert needs \"entity\" and \"temporaryID\"") }
            var ins = Ubiquity_V1_Insert()
            ins.temporaryID = tid
            ins.entity = entity
            ins.values = try JSONValues.values(i["values"] as? [String: Any] ?? [:], entity: entity, model: model)
            ins.relationships = try JSONValues.relationships(i["relationships"], entity: entity, model: model)
            req.inserts.append(ins)
        }
        for case let u as [String: Any] in batch["updates"] as? [Any] ?? [] {
            guard let id = u["objectID"] as? String, let entity = id.split(separator: "/").dropLast().last.map(String.init) else { throw CLIError("every update needs an \"objectID\"") }
            var up = Ubiquity_V1_Update()
            up.objectID = id
            if let v = u["expectedVersion"] as? NSNumber { up.expectedVersion = v.int64Value }
            up.values = try JSONValues.values(u["values"] as? [String: Any] ?? [:], entity: entity, model: model)
            up.relationships = try JSONValues.relationships(u["relationships"], entity: entity, model: model)
            req.updates.append(up)
        }
        for case let d as String in batch["deletes"] as? [Any] ?? [] {
            var del = Ubiquity_V1_Delete()
            del.objectID = d
            req.deletes.append(del)
        }
        let r = try await s.unary("Stores/Save", req, Ubiquity_V1_SaveResult.self)
        print(r.dryRun ? "dry run: the batch is valid and has no unresolved conflicts" : "saved, generation \(r.generation)\(r.replayed ? " (replayed: this transaction ID had committed already)" : "")")
        for (t, p) in r.permanentIds.sorted(by: { $0.key < $1.key }) { print("  \(t) → \(p)") }
        for c in r.resolvedConflicts { print("  resolved conflict on \(c.objectID)") }
    }
}

struct Generation: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the store's current generation and its token.")
    @OptionGroup var server: ServerOptions
    @Option(help: "The store's name.") var store: String
    func run() async throws {
        let s = try await server.connect()
        let info = try await s.store(store)
        var r = Ubiquity_V1_CurrentGenerationRequest()
        r.storeID = info.storeID
        let g = try await s.unary("Stores/CurrentGeneration", r, Ubiquity_V1_CurrentGenerationResponse.self)
        print("generation \(g.generation)")
        print("token \(Hex.encode(g.token))")
    }
}

/// A plain text table: object ID, then one column per attribute.
enum Table {
    static func print(_ objects: [Ubiquity_V1_ManagedObject]) {
        guard !objects.isEmpty else { Swift.print("(no objects)"); return }
        let keys = Array(Set(objects.flatMap { $0.values.keys })).sorted()
        let header = ["id"] + keys
        let rows = objects.map { o in
            [String(o.objectID.split(separator: "/").suffix(2).joined(separator: "/"))] + keys.map { k in o.values[k].map(JSONValues.display) ?? "" }
        }
        var widths = header.map(\.count)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = min(40, max(widths[i], c.count)) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                let t = c.count > 40 ? String(c.prefix(39)) + "…" : c
                return t.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        Swift.print(line(header))
        Swift.print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for r in rows { Swift.print(line(r)) }
    }
}
