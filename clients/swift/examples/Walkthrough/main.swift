// The README's walkthrough: a store, a model, a feed, a context save, a fetch, a conflict, a read at
// an old token, and a typed error. CI runs it against the server it builds:
//   swift run ubiquity-walkthrough 127.0.0.1:50051 <api key>
// (the API key from `Accounts.CreateApiKey`, docs/accounts.md; without one, a server run with
// `--auth off`).
import Foundation
import Ubiquity

func walkthrough(target: String, apiKey: String?) async throws {
    let credentials: Credentials = apiKey.map { .apiKey($0, deviceID: "walkthrough") } ?? .none
    let client = try UbiquityClient(target: target, credentials: credentials)
    let store = try await client.openStore("walkthrough-\(UUID().uuidString.prefix(8))")
    try await store.registerModel(.with {
        $0.versionIdentifier = "v1"
        $0.entities = [.with {
            $0.name = "Person"
            $0.attributes = [
                .with { $0.name = "name"; $0.type = .string; $0.required = true },
                .with { $0.name = "age"; $0.type = .int32 },
            ]
        }]
    })

    // Every committed save after this token, in order. (`.now` would be wherever the server is
    // when the feed's subscribe reaches it, which a save made right after may beat.)
    var feed = store.changes(from: .token(try await store.currentToken())).makeAsyncIterator()

    // A context is a unit of work: changes stay pending until save().
    let ui = try await store.context(name: "ui", mergePolicy: .objectTrump)
    let temporary = try await ui.insert("Person", ["name": "Ann", "age": 30])
    let saved = try await ui.save()  // one transaction; retried safely if the answer is lost
    let ann = saved.permanentIDs[temporary]!
    print("saved Ann as \(ann) at generation \(saved.generation)")

    let people = try await store.fetch("Person", where: "age > $min", ["min": 18], sort: [.descending("age")], limit: 10)
    print("adults:", people.objects.compactMap { $0["name"]?.string })

    while let event = try await feed.next() {
        if let tx = event.transactions.first {
            print("feed: generation \(tx.generation):", tx.changes.map { "\($0.kind) \($0.objectID)" })
            break
        }
    }

    // A conflict: another writer changed Ann after this context read her.
    let before = try await store.currentToken()
    let editor = try await store.context(name: "editor")  // merge policy .error
    _ = try await editor.fetch("Person")                  // pins what the editor reads
    _ = try await store.save(updates: [Update(ann, ["age": 31])])
    try await editor.update(ann, ["age": 40])
    do {
        try await editor.save()
    } catch let error as UbiquityError where error.kind == .conflict {
        let c = error.conflicts[0]
        print("conflict on \(c.objectID): store has age \(c.storeValues["age"]?.int ?? 0), version \(c.storeVersion)")
        try await editor.rollback()
    }

    // Reads at an old token see the store as it was.
    let then = try await store.fetch("Person", at: before)
    print("age at the old token:", then.objects[0]["age"]?.int ?? 0)

    // Errors are typed: the ErrorInfo reason, the fields at fault.
    do {
        _ = try await store.fetch("Person", where: "age >")
    } catch let error as UbiquityError {
        print("bad predicate:", error.reason ?? "", error.violations.first?.field ?? "")
    }

    feed.cancel()
    try await ui.close()
    try await editor.close()
    await client.close()
    print("walkthrough done")
}

let arguments = CommandLine.arguments.dropFirst()
try await walkthrough(
    target: arguments.first ?? "127.0.0.1:50051",
    apiKey: arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["UBIQUITY_API_KEY"])
