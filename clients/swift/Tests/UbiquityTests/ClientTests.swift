import Foundation
import GRPCCore
import Testing
import Ubiquity

/// The client against a real ubiquityd: stores, fetches, saves, contexts, typed errors.
@Suite(.timeLimit(.minutes(2))) struct ClientTests {
    @Test func openListAndReopenStores() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let name = "s-\(UUID().uuidString)"
        let a = try await f.client.openStore(name)
        #expect(a.created)
        let b = try await f.client.openStore(name, mustExist: true)
        #expect(b.id == a.id && !b.created)
        #expect(try await f.client.listStores().map(\.name).contains(name))
        let error = await #expect(throws: UbiquityError.self) {
            try await f.client.openStore("missing-\(UUID().uuidString)", mustExist: true)
        }
        #expect(error?.kind == .notFound && error?.reason == "STORE_NOT_FOUND")
    }

    @Test func saveThenFetchWithPredicateArgumentsSortLimitOffset() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ids = try await addPeople(f.store, [
            ["name": "Ann", "age": 30], ["name": "Bob", "age": 40], ["name": "Cid", "age": 50], ["name": "Dee", "age": 20],
        ])
        let adults = try await f.store.fetch("Person", where: "age >= $min", ["min": 30], sort: [.descending("age")])
        #expect(adults.objects.map { $0["name"]?.string } == ["Cid", "Bob", "Ann"])
        #expect(adults.token != nil)
        let page = try await f.store.fetch("Person", sort: [.ascending("age")], limit: 2, offset: 1)
        #expect(page.objects.map { $0["name"]?.string } == ["Ann", "Bob"])
        let inList = try await f.store.fetch("Person", where: "name IN $names", ["names": ["Dee", "Bob"]], sort: [.ascending("name")])
        #expect(inList.objects.map(\.id) == [ids[1], ids[3]])
        let count = try await f.store.fetch("Person", where: "age < 45", resultType: .count)
        #expect(count.count == 3)
        let onlyIDs = try await f.store.fetch("Person", where: "name == 'Ann'", resultType: .objectIDs)
        #expect(onlyIDs.objectIDs == [ids[0]])
        let rows = try await f.store.fetch("Person", where: "age > 35", sort: [.ascending("age")], resultType: .dictionaries, properties: ["name"])
        #expect(rows.rows.map { $0["name"]?.string } == ["Bob", "Cid"])
        let got = try await f.store.get([ids[0], ids[2]])
        #expect(Set(got.values.compactMap { $0["name"]?.string }) == ["Ann", "Cid"])
        #expect(got[ids[0]]?.version == 1)
    }

    @Test func fetchAtATokenSeesTheStoreAsItWas() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ann = try await addPeople(f.store, [["name": "Ann", "age": 30]])[0]
        let before = try await f.store.currentToken()
        _ = try await f.store.save(updates: [Update(ann, ["age": 31])])
        #expect(try await f.store.fetch("Person", at: before).objects.first?["age"]?.int == 30)
        #expect(try await f.store.get([ann], at: before)[ann]?["age"]?.int == 30)
        #expect(try await f.store.fetch("Person").objects.first?["age"]?.int == 31)
    }

    @Test func contextUnitOfWorkPendingStateSaveRollbackReset() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ctx = try await f.store.context(name: "ui")
        let tmp = try await ctx.insert("Person", ["name": "Ann", "age": 30])
        let pending = await ctx.state
        #expect(pending.hasChanges && pending.insertedCount == 1)
        #expect(try await ctx.fetch("Person").objects.map { $0["name"]?.string } == ["Ann"])
        #expect(try await ctx.fetch("Person", includePending: false).objects.isEmpty)
        #expect(try await f.store.fetch("Person").objects.isEmpty)  // nothing in the store before save
        let saved = try await ctx.save()
        let ann = try #require(saved.permanentIDs[tmp])
        #expect(await !ctx.hasChanges)
        #expect(try await f.store.get([ann])[ann]?["name"]?.string == "Ann")

        try await ctx.refresh()
        try await ctx.update(ann, ["age": 31])
        try await ctx.delete(ann)
        let deleting = await ctx.state
        #expect(deleting.deletedCount == 1)
        try await ctx.rollback()
        #expect(try await !ctx.refreshState().hasChanges)
        try await ctx.insert("Person", ["name": "Bob"])
        try await ctx.reset()
        #expect(await !ctx.hasChanges)
        try await ctx.close()
        #expect(try await f.store.fetch("Person").objects.map { $0["name"]?.string } == ["Ann"])
        let error = await #expect(throws: UbiquityError.self) { try await ctx.refreshState() }
        #expect(error?.kind == .notFound && error?.reason == "CONTEXT_NOT_FOUND")
    }

    @Test func aNestedContextSavesIntoItsParentWhoseSaveCommits() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let parent = try await f.store.context(name: "parent")
        let child = try await parent.child(name: "child")
        try await child.insert("Person", ["name": "Ann"])
        let intoParent = try await child.save()
        #expect(intoParent.savedToParent)
        #expect(try await parent.refreshState().insertedCount == 1)
        #expect(try await f.store.fetch("Person").objects.isEmpty)  // not in the store yet
        let committed = try await parent.save()
        #expect(!committed.savedToParent && committed.permanentIDs.count == 1)
        #expect(try await f.store.fetch("Person").objects.map { $0["name"]?.string } == ["Ann"])
    }

    /// A context that read Ann at age 30, then the store moved her to 35 and email new@x.
    func conflictingContext(_ store: Store, _ policy: MergePolicy) async throws -> (Context, String) {
        let ann = try await addPeople(store, [["name": "Ann", "age": 30, "score": 1.0, "email": "old@x"]])[0]
        let ctx = try await store.context(name: "ui", mergePolicy: policy)
        _ = try await ctx.fetch("Person")  // pins the generation the context reads
        _ = try await store.save(updates: [Update(ann, ["age": 35, "email": "new@x"])])
        try await ctx.update(ann, ["age": 33, "score": 9.0])
        return (ctx, ann)
    }

    @Test func conflictUnderErrorPolicyThrowsWithDecodedRecords() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let (ctx, ann) = try await conflictingContext(f.store, .error)
        let error = try #require(await #expect(throws: UbiquityError.self) { try await ctx.save() })
        #expect(error.kind == .conflict && error.reason == "MERGE_CONFLICT" && error.code == .aborted)
        let c = try #require(error.conflicts.first)
        #expect(error.conflicts.count == 1)
        #expect(c.kind == .versionChanged && c.objectID == ann)
        #expect(c.clientVersion == 1 && c.storeVersion == 2)
        #expect(c.storeValues["age"]?.int == 35 && c.clientChanges["score"]?.double == 9.0)
        #expect(await ctx.hasChanges)  // pending changes are kept for a retry
        #expect(try await f.store.get([ann])[ann]?["score"]?.double == 1.0)  // nothing applied
    }

    // Both sides changed age; only the context changed score; only the store changed email.
    @Test(arguments: [
        (MergePolicy.storeTrump, 35, 9.0, "new@x"),
        (MergePolicy.objectTrump, 33, 9.0, "new@x"),
        (MergePolicy.overwrite, 33, 9.0, "old@x"),
        (MergePolicy.rollback, 35, 1.0, "new@x"),
    ])
    func conflictUnderEachTrumpPolicy(policy: MergePolicy, age: Int64, score: Double, email: String) async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let (ctx, ann) = try await conflictingContext(f.store, policy)
        let result = try await ctx.save()
        let got = try #require(try await f.store.get([ann])[ann])
        #expect(got["age"]?.int == age && got["score"]?.double == score && got["email"]?.string == email)
        if policy == .rollback {
            #expect(result.skippedObjectIDs == [ann])
        } else {
            #expect(result.resolvedConflicts.map(\.objectID) == [ann])
        }
    }

    @Test func pinnedContextReadsItsGenerationUntilRefreshed() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ann = try await addPeople(f.store, [["name": "Ann", "age": 30]])[0]
        let pinnedAt = try await f.store.currentToken()
        _ = try await f.store.save(updates: [Update(ann, ["age": 31])])
        let ctx = try await f.store.context(generation: .pinned(pinnedAt))
        #expect(try await ctx.fetch("Person").objects.first?["age"]?.int == 30)
        _ = try await f.store.save(updates: [Update(ann, ["age": 32])])
        #expect(try await ctx.fetch("Person").objects.first?["age"]?.int == 30)
        let mode = await ctx.state.generationMode
        #expect(mode == .pinnedAtToken)
        try await ctx.pin(.unpinned)
        #expect(try await ctx.fetch("Person").objects.first?["age"]?.int == 32)
        let first = try await f.store.context()  // pinned at first read
        #expect(try await first.fetch("Person").objects.first?["age"]?.int == 32)
        _ = try await f.store.save(updates: [Update(ann, ["age": 33])])
        #expect(try await first.fetch("Person").objects.first?["age"]?.int == 32)
        try await first.refresh()
        #expect(try await first.fetch("Person").objects.first?["age"]?.int == 33)
    }

    @Test func constraintClashIsAConstraintConflict() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        _ = try await addPeople(f.store, [["name": "Ann", "email": "ann@x"]])
        let error = try #require(await #expect(throws: UbiquityError.self) {
            try await addPeople(f.store, [["name": "Ann2", "email": "ann@x"]])
        })
        #expect(error.kind == .constraintConflict && error.reason == "CONSTRAINT_CONFLICT")
        #expect(error.conflicts.first?.kind == .uniquenessClash && error.conflicts.first?.constraint == ["email"])
    }

    @Test func badInputThrowsTypedErrorsWithReasonAndFields() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let syntax = try #require(await #expect(throws: UbiquityError.self) { try await f.store.fetch("Person", where: "age >") })
        #expect(syntax.kind == .invalidArgument && syntax.reason == "PREDICATE_SYNTAX")
        #expect(syntax.violations.first?.field == "fetch.predicate")
        let entity = await #expect(throws: UbiquityError.self) { try await f.store.fetch("Nobody") }
        #expect(entity?.reason == "UNKNOWN_ENTITY")
        let invalid = try #require(await #expect(throws: UbiquityError.self) {
            try await f.store.save(inserts: [Insert("a", "Person", ["age": 3])])  // name is required
        })
        #expect(invalid.reason == "VALIDATION_FAILED")
        #expect(invalid.violations.contains { $0.field.hasPrefix("inserts[0].values.name") })
        #expect(try await f.store.fetch("Person").objects.isEmpty)  // nothing applied
        let token = await #expect(throws: UbiquityError.self) {
            try await f.store.fetch("Person", at: GenerationToken(Data("not a token".utf8)))
        }
        #expect(token?.reason == "BAD_TOKEN")
        let other = try await f.client.openStore("other-\(UUID().uuidString)")
        let noModel = await #expect(throws: UbiquityError.self) { try await other.fetch("Person") }
        #expect(noModel?.kind == .failedPrecondition && noModel?.reason == "NO_MODEL")
    }

    @Test func theSameClientTransactionIDAppliesOnce() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let first = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])], clientTransactionID: "tx-1")
        let again = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])], clientTransactionID: "tx-1")
        #expect(!first.replayed && again.replayed)
        #expect(again.permanentIDs == first.permanentIDs)
        #expect(try await f.store.fetch("Person", resultType: .count).count == 1)
    }

    @Test(arguments: ["store", "context"])
    func aSaveWhoseResponseWasLostIsRetriedAndAppliedOnce(via: String) async throws {
        let lose = LoseFirstSaveResponse()
        let f = try await Fixture.make(interceptors: [lose])
        defer { Task { await f.close() } }
        let result: SaveResult
        if via == "store" {
            result = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        } else {
            let ctx = try await f.store.context()
            try await ctx.insert("Person", ["name": "Ann"])
            result = try await ctx.save()
        }
        #expect(lose.lost == 1 && result.replayed)
        #expect(try await f.store.fetch("Person", resultType: .count).count == 1)
    }

    @Test func valuesRoundTripWithTheirKinds() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ann = try await addPeople(f.store, [["name": "Ann", "age": .int32(7), "score": 2.5, "email": nil]])[0]
        let got = try #require(try await f.store.get([ann])[ann])
        #expect(got["name"] == "Ann" && got["age"]?.int == 7 && got["score"] == 2.5)
        #expect(got["email"] == nil || got["email"] == .null)
    }
}

/// Lets the first Save reach the server and apply, then reports it as timed out: the case a client
/// transaction ID exists for (the client cannot know whether the save happened).
final class LoseFirstSaveResponse: ClientInterceptor, Sendable {
    private let count = Synchronization.Mutex(0)
    var lost: Int { count.withLock { $0 } }

    func intercept<Input: Sendable, Output: Sendable>(
        request: StreamingClientRequest<Input>, context: ClientContext,
        next: (StreamingClientRequest<Input>, ClientContext) async throws -> StreamingClientResponse<Output>
    ) async throws -> StreamingClientResponse<Output> {
        let response = try await next(request, context)
        guard context.descriptor.method == "Save", count.withLock({ $0 }) == 0 else { return response }
        // Read the whole response: the server has applied the save and answered.
        for try await _ in response.messages {}
        count.withLock { $0 += 1 }
        return StreamingClientResponse(error: RPCError(code: .deadlineExceeded, message: "response lost (test)"))
    }
}

import Synchronization
