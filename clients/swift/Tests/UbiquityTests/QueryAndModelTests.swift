import Foundation
import GRPCCore
import Testing
@testable import Ubiquity

/// Person (name, city, age; to-many `notes`), its sub-entity Editor, and Note (text; to-one
/// `author`, the inverse): a model with relationships, for grouping, prefetching and setting
/// relationships. `nickname` (optional) is what version 2 adds, a lightweight migration.
func notesModel(version: String = "v1", nickname: Bool = false) -> Ubiquity_V1_Model {
    func attribute(_ name: String, _ type: Ubiquity_V1_AttributeType) -> Ubiquity_V1_Attribute {
        .with {
            $0.name = name
            $0.type = type
            $0.keepOnDelete = name == "name"  // in delete tombstones
        }
    }
    return .with {
        $0.versionIdentifier = version
        $0.entities = [
            .with {
                $0.name = "Person"
                $0.attributes = [attribute("name", .string), attribute("city", .string), attribute("age", .int32)]
                    + (nickname ? [attribute("nickname", .string)] : [])
                $0.relationships = [
                    .with {
                        $0.name = "notes"
                        $0.destination = "Note"
                        $0.toMany = true
                        $0.inverse = "author"
                        $0.deleteRule = .cascade
                    }
                ]
            },
            .with {
                $0.name = "Editor"
                $0.parent = "Person"
            },
            .with {
                $0.name = "Note"
                $0.attributes = [attribute("text", .string)]
                $0.relationships = [
                    .with {
                        $0.name = "author"
                        $0.destination = "Person"
                        $0.inverse = "notes"
                        $0.deleteRule = .nullify
                    }
                ]
            },
        ]
    }
}

/// What `FetchRequest` offers beyond a plain fetch, the read-your-writes fence, relationships set
/// by saves and contexts, and model registration (dry run, version checks) — against a real
/// ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct QueryAndModelTests {
    /// A store with the notes model: Ann and Bob in Oslo, Cy in Rome, Dee (an Editor) in Rome;
    /// Ann wrote two notes, Bob one. Returns the store and the permanent IDs by temporary ID.
    func notesStore(_ f: Fixture) async throws -> (Store, [String: String]) {
        let store = try await f.client.openStore("notes-\(UUID().uuidString)")
        try await store.registerModel(notesModel())
        let saved = try await store.save(inserts: [
            Insert("ann", "Person", ["name": "Ann", "city": "Oslo", "age": 30]),
            Insert("bob", "Person", ["name": "Bob", "city": "Oslo", "age": 40]),
            Insert("cy", "Person", ["name": "Cy", "city": "Rome", "age": 30]),
            Insert("dee", "Editor", ["name": "Dee", "city": "Rome", "age": 50]),
            Insert("n1", "Note", ["text": "one"], relationships: ["author": [.inserted("ann")]]),
            Insert("n2", "Note", ["text": "two"], relationships: ["author": [.inserted("ann")]]),
            Insert("n3", "Note", ["text": "three"], relationships: ["author": [.inserted("bob")]]),
        ])
        return (store, saved.permanentIDs)
    }

    @Test func groupsHavingDistinctPrefetchAndSubentities() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let (store, ids) = try await notesStore(f)

        // Relationships set by the save, both sides (the inverse maintained by the server).
        let notes = try await store.fetch(FetchRequest("Note", sort: [.ascending("text")]))
        #expect(notes.objects.map { $0.relationships["author"] } == [[ids["ann"]!], [ids["bob"]!], [ids["ann"]!]])
        let ann = try #require(try await store.get([ids["ann"]!])[ids["ann"]!])
        #expect(Set(ann.relationships["notes"] ?? []) == [ids["n1"]!, ids["n2"]!])

        // Cities with more than one person, and how many.
        let grouped = try await store.fetch(
            FetchRequest(
                "Person", ["min": 1], sort: [.ascending("city")], resultType: .dictionaries,
                properties: ["city", "n = count:(SELF)"], groupBy: ["city"], having: "n > $min"))
        #expect(grouped.rows.map { $0["city"] } == [.string("Oslo"), .string("Rome")])
        #expect(grouped.rows.map { $0["n"]?.int } == [2, 2])
        let onlyThree = try await store.fetch(
            FetchRequest(
                "Person", ["min": 2], resultType: .dictionaries, properties: ["city", "n = count:(SELF)"],
                groupBy: ["city"], having: "n > $min"))
        #expect(onlyThree.rows.isEmpty)

        // Distinct rows: four people, three (age) values.
        let ages = try await store.fetch(
            FetchRequest("Person", sort: [.ascending("age")], resultType: .dictionaries, properties: ["age"], distinct: true))
        #expect(ages.rows.map { $0["age"]?.int } == [30, 40, 50])
        let allAges = try await store.fetch(FetchRequest("Person", resultType: .dictionaries, properties: ["age"]))
        #expect(allAges.rows.count == 4)

        // Prefetching: the notes' authors come with them, each once.
        let withAuthors = try await store.fetch(FetchRequest("Note", prefetch: ["author"]))
        #expect(Set(withAuthors.prefetched.keys) == [ids["ann"]!, ids["bob"]!])
        #expect(withAuthors.prefetched[ids["bob"]!]?["name"] == "Bob")
        #expect(try await store.fetch(FetchRequest("Note")).prefetched.isEmpty)

        // Sub-entities: a Person fetch includes the Editor unless told not to.
        #expect(try await store.fetch(FetchRequest("Person", resultType: .count)).count == 4)
        #expect(try await store.fetch(FetchRequest("Person", resultType: .count, excludesSubentities: true)).count == 3)

        // A grouped fetch whose plain property is not grouped is refused, typed.
        let refused = await #expect(throws: UbiquityError.self) {
            try await store.fetch(
                FetchRequest("Person", resultType: .dictionaries, properties: ["name", "n = count:(SELF)"], groupBy: ["city"]))
        }
        #expect(refused?.code == .invalidArgument)
    }

    @Test func relationshipsAreSetByUpdatesAndContexts() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let (store, ids) = try await notesStore(f)
        // A store-level update moves note three from Bob to Cy; another empties it.
        _ = try await store.save(updates: [Update(ids["n3"]!, [:], relationships: ["author": [.object(ids["cy"]!)]])])
        #expect(try await store.get([ids["n3"]!])[ids["n3"]!]?.relationships["author"] == [ids["cy"]!])
        #expect(try await store.get([ids["bob"]!])[ids["bob"]!]?.relationships["notes"] ?? [] == [])
        _ = try await store.save(updates: [Update(ids["n3"]!, [:], relationships: ["author": []])])
        #expect(try await store.get([ids["n3"]!])[ids["n3"]!]?.relationships["author"] ?? [] == [])

        // A context: a pending person, a pending note pointing at it by its context ID, saved
        // together; then the note re-pointed at an existing person.
        let context = try await store.context(name: "editor")
        defer { Task { try? await context.close() } }
        let eve = try await context.insert("Person", ["name": "Eve", "city": "Paris"])
        let note = try await context.insert("Note", ["text": "four"], relationships: ["author": [eve]])
        let saved = try await context.save()
        let (eveID, noteID) = (try #require(saved.permanentIDs[eve]), try #require(saved.permanentIDs[note]))
        #expect(try await store.get([noteID])[noteID]?.relationships["author"] == [eveID])
        #expect(try await store.get([eveID])[eveID]?.relationships["notes"] == [noteID])
        try await context.update(noteID, relationships: ["author": [ids["ann"]!]])
        _ = try await context.save()
        #expect(try await store.get([noteID])[noteID]?.relationships["author"] == [ids["ann"]!])
        // A relationship the entity does not have: refused, nothing pending.
        let refused = await #expect(throws: UbiquityError.self) {
            try await context.update(noteID, relationships: ["editor": [ids["ann"]!]])
        }
        #expect(refused?.code == .invalidArgument)
        #expect(await context.hasChanges == false)
    }

    @Test func theReadYourWritesFenceWaitsForNothingItHasAndRefusesWhatItHasNot() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let saved = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        let ann = try #require(saved.permanentIDs["a"])
        let read = try await f.store.fetch(FetchRequest("Person"), atLeast: saved.generation)
        #expect(read.objectIDs == [ann])
        #expect(try await f.store.get([ann], atLeast: saved.generation).keys.contains(ann))
        // A generation the store has not reached: UNAVAILABLE, retry later.
        let ahead = await #expect(throws: UbiquityError.self) {
            try await f.store.fetch(FetchRequest("Person"), atLeast: saved.generation + 10)
        }
        #expect(ahead?.kind == .unavailable && ahead?.reason == "GENERATION_NOT_REACHED")
        let aheadGet = await #expect(throws: UbiquityError.self) {
            try await f.store.get([ann], atLeast: saved.generation + 10)
        }
        #expect(aheadGet?.reason == "GENERATION_NOT_REACHED")
    }

    @Test func aModelIsDryRunThenMigratedAndStaleWritersAreRefused() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let store = try await f.client.openStore("versions-\(UUID().uuidString)")
        let v1 = try await store.registerModel(notesModel())
        #expect(v1.fromVersionHash.isEmpty && !v1.versionHash.isEmpty && v1.token != nil && !v1.dryRun)
        let old = store.expecting(modelVersion: v1.versionHash)
        _ = try await old.save(inserts: [Insert("a", "Person", ["name": "Ann"])])

        // The dry run says what v2 would do and changes nothing.
        let dry = try await store.registerModel(notesModel(version: "v2", nickname: true), dryRun: true)
        #expect(dry.dryRun && dry.token == nil && dry.fromVersionHash == v1.versionHash)
        #expect(dry.versionHash != v1.versionHash && !dry.steps.isEmpty)
        #expect(try await store.model()?.versionHash == v1.versionHash)
        _ = try await old.save(inserts: [Insert("b", "Person", ["name": "Bob"])])

        let v2 = try await store.registerModel(notesModel(version: "v2", nickname: true))
        #expect(v2.versionHash == dry.versionHash && v2.steps == dry.steps && !v2.dryRun && v2.token != nil)
        #expect(try await store.registerModel(notesModel(version: "v2", nickname: true)).unchanged)

        // A writer built against v1 is refused now, and nothing it sent is applied.
        let stale = await #expect(throws: UbiquityError.self) {
            try await old.save(inserts: [Insert("c", "Person", ["name": "Cy"])])
        }
        #expect(stale?.code == .failedPrecondition && stale?.reason == "MODEL_VERSION_MISMATCH")
        let staleBatch = await #expect(throws: UbiquityError.self) {
            try await old.batchInsert("Person", [["name": "Cy"]])
        }
        #expect(staleBatch?.reason == "MODEL_VERSION_MISMATCH")
        let oldContext = try await old.context()
        defer { Task { try? await oldContext.close() } }
        try await oldContext.insert("Person", ["name": "Cy"])
        let staleContext = await #expect(throws: UbiquityError.self) { try await oldContext.save() }
        #expect(staleContext?.reason == "MODEL_VERSION_MISMATCH")
        #expect(try await store.fetch(FetchRequest("Person", resultType: .count)).count == 2)
        // Reads are not checked; a writer built against v2 writes.
        #expect(try await old.fetch(FetchRequest("Person", resultType: .count)).count == 2)
        let current = store.expecting(modelVersion: v2.versionHash)
        _ = try await current.save(inserts: [Insert("c", "Person", ["name": "Cy", "nickname": "C"])])
        let context = try await current.context()
        defer { Task { try? await context.close() } }
        try await context.insert("Person", ["name": "Dee"])
        _ = try await context.save()
        #expect(try await store.fetch(FetchRequest("Person", resultType: .count)).count == 4)
    }
}
