// libFuzzer target: every input is a predicate over Person in a small store. It must never trap
// (lexer, parser, checker, SQL compiler, in-memory evaluator), and when it runs, the SQL answer
// (Store.fetchSync) and the in-memory answer (Predicate.evaluate over the same objects) must be
// the same set of objects — the property docs/query.md promises for pending objects in
// contexts. A disagreement traps with the predicate, so libFuzzer saves it as a crash.
//
// Built with -parse-as-library. SwiftPM links an executable's `main` to `<Target>_main` (so that
// tests can link executables), which a libFuzzer target does not have: `FuzzPredicate_main`
// below hands control to libFuzzer's driver, and libFuzzer's own main() is then not linked.
import Dispatch
import Foundation
import UbiquityQuery
import UbiquityStorage

/// The store every input runs against, made once per process.
final class Fixture: @unchecked Sendable {
    // Invariant: set up once in `init` and only read afterwards (libFuzzer runs inputs on one thread).
    let store: Store
    let model: ModelDefinition
    let objects: [ObjectSnapshot]
    let byID: [ObjectID: ObjectSnapshot]

    static let shared = Fixture()

    init() {
        let A = AttributeDefinition.init(name:type:optional:defaultValue:minimum:maximum:keepOnDelete:renamingIdentifier:)
        model = ModelDefinition(entities: [
            EntityDefinition(name: "Person", attributes: [
                A("name", .string, true, nil, nil, nil, false, nil), A("age", .int32, true, nil, nil, nil, false, nil),
                A("score", .double, true, nil, nil, nil, false, nil), A("flag", .bool, true, nil, nil, nil, false, nil),
                A("born", .date, true, nil, nil, nil, false, nil), A("code", .uuid, true, nil, nil, nil, false, nil),
            ], relationships: [
                RelationshipDefinition(name: "mentor", destination: "Person", inverse: "mentees"),
                RelationshipDefinition(name: "mentees", destination: "Person", toMany: true, inverse: "mentor"),
                RelationshipDefinition(name: "notes", destination: "Note", toMany: true, inverse: "owner"),
            ]),
            EntityDefinition(name: "Note", attributes: [A("text", .string, true, nil, nil, nil, false, nil)], relationships: [
                RelationshipDefinition(name: "owner", destination: "Person", inverse: "notes"),
            ]),
        ])
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ubiq-fuzz-\(getpid())")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        store = try! Store.open(path: dir.appendingPathComponent("fuzz.sqlite").path, id: UUID(), model: model)
        let names = ["Ann", "ann", "Émile", "e\u{301}mile", "Zoë", "straße", "a*b", "50%_off", "", "it's"]
        var request = SaveRequest()
        for i in 0..<24 {
            var values: [String: StorageValue] = ["name": i % 7 == 0 ? .null : .string(names[i % names.count]),
                                                  "age": i % 5 == 0 ? .null : .int(Int64(i % 6) * 10),
                                                  "score": .double(Double(i % 4) / 2), "flag": .bool(i % 2 == 0),
                                                  "born": .date(Double(i % 3) * 1000)]
            if i % 3 == 0 { values["code"] = .uuid(UUID(uuidString: "00000000-0000-0000-0000-00000000000\(i % 10)")!) }
            var rels: [String: [ObjectReference]] = [:]
            if i > 0 && i % 2 == 1 { rels["mentor"] = [.temporary("p\(i / 3)")] }
            request.inserts.append(InsertOperation(temporaryID: "p\(i)", entity: "Person", values: values, relationships: rels))
            for k in 0..<(i % 3) {
                request.inserts.append(InsertOperation(temporaryID: "n\(i)-\(k)", entity: "Note", values: ["text": .string(names[(i + k) % names.count])],
                                                       relationships: ["owner": [.temporary("p\(i)")]]))
            }
        }
        let done = DispatchSemaphore(value: 0)
        let store = self.store
        Task {
            _ = try! await store.save(request)
            done.signal()
        }
        done.wait()
        var all = FetchRequest(entity: "Person")
        all.includesSubentities = true
        objects = try! store.fetchSync(all).objects
        var everything = try! store.fetchSync(FetchRequest(entity: "Note")).objects
        everything += objects
        byID = Dictionary(uniqueKeysWithValues: everything.map { ($0.id, $0) })
    }

    func check(_ text: String) {
        var request = FetchRequest(entity: "Person")
        request.predicate = text
        request.resultType = .objectIDs
        guard let sql = try? store.fetchSync(request) else { return }    // refused: fine, if it did not trap
        guard let predicate = try? Predicate.parse(text, entity: "Person", model: model) else {
            preconditionFailure("SQL ran a predicate the evaluator cannot parse: \(text.debugDescription)")
        }
        var inMemory = Set<ObjectID>()
        for object in objects {
            guard let matches = try? predicate.evaluate(object, resolve: { self.byID[$0] }) else { return }
            if matches { inMemory.insert(object.id) }
        }
        precondition(Set(sql.objectIDs) == inMemory,
                     "SQL and in-memory disagree on \(text.debugDescription): SQL \(sql.objectIDs.map(\.pk).sorted()), memory \(inMemory.map(\.pk).sorted())")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPredicate(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    Fixture.shared.check(String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self))
    return 0
}

/// libFuzzer's entry point for programs with their own main (LLVM 11+).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("FuzzPredicate_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzPredicate)
}
