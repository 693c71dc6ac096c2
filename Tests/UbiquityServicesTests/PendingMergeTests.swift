import Foundation
import UbiquityStorage
import XCTest
@testable import UbiquityServices

/// `Pending.merge`: how a call's changes reach their context, a child's reach its parent, and a
/// child sees through its ancestors.
final class PendingMergeTests: XCTestCase {
    private let store = UUID()
    private func temp(_ n: Int64) -> ObjectID { ObjectID(storeID: store, entity: "Note", pk: -n) }
    private func stored(_ n: Int64) -> ObjectID { ObjectID(storeID: store, entity: "Note", pk: n) }

    private func inserting(_ id: ObjectID, title: String) -> Pending {
        var p = Pending()
        p.inserted[id.pk] = PendingInsert(id: id, values: ["title": .string(title)], relationships: [:])
        p.insertOrder.append(id.pk)
        return p
    }

    private func updating(_ id: ObjectID, title: String) -> Pending {
        var p = Pending()
        p.updated[id] = PendingUpdate(baseVersion: 0, baseValues: [:], values: ["title": .string(title)], relationships: [:])
        return p
    }

    private func deleting(_ id: ObjectID) -> Pending {
        var p = Pending()
        p.deleted[id] = 0
        return p
    }

    func testAnUpdateOfAnInsertFoldsIntoTheInsert() {
        var context = inserting(temp(1), title: "draft")
        // a call's changes arrive as their own set, merged into the context
        var call = Pending()
        call.merge(updating(temp(1), title: "final"))
        context.merge(call)
        XCTAssertEqual(context.inserted[-1]?.values["title"], .string("final"))
        XCTAssertTrue(context.updated.isEmpty)
    }

    func testAChildsUpdateOfItsParentsInsertReachesTheParent() {
        let parent = inserting(temp(1), title: "draft")
        var child = Pending()
        child.merge(updating(temp(1), title: "final"))
        XCTAssertEqual(child.updated.count, 1, "the child keeps its change until it saves")
        var view = Pending()
        view.merge(parent)
        view.merge(child)
        XCTAssertEqual(view.inserted[-1]?.values["title"], .string("final"), "the child sees its change")
        var saved = parent
        saved.merge(child)
        XCTAssertEqual(saved.inserted[-1]?.values["title"], .string("final"))
        XCTAssertTrue(saved.updated.isEmpty)
    }

    func testAChildsDeleteOfItsParentsInsertRemovesIt() {
        var parent = inserting(temp(1), title: "draft")
        var child = Pending()
        child.merge(updating(temp(1), title: "final"))
        child.merge(deleting(temp(1)))
        XCTAssertTrue(child.updated.isEmpty)
        XCTAssertEqual(child.deleted.count, 1)
        parent.merge(child)
        XCTAssertTrue(parent.inserted.isEmpty)
        XCTAssertTrue(parent.insertOrder.isEmpty)
        XCTAssertTrue(parent.deleted.isEmpty, "inserted and deleted before a save: nothing to save")
    }

    func testChangesToAnInsertDeletedMeanwhileDoNotReachTheSave() throws {
        var parent = inserting(temp(1), title: "draft")
        var child = Pending()
        child.merge(updating(temp(1), title: "final"))
        parent.merge(deleting(temp(1)))
        parent.merge(child)
        let save = try ContextsService.saveRequest(parent)
        XCTAssertTrue(save.inserts.isEmpty)
        XCTAssertTrue(save.updates.isEmpty)
        XCTAssertTrue(save.deletes.isEmpty)
        XCTAssertTrue(parent.storedIDs.isEmpty)
    }

    func testPermanentObjectsAreUnchanged() {
        var context = updating(stored(7), title: "a")
        context.merge(updating(stored(7), title: "b"))
        XCTAssertEqual(context.updated[stored(7)]?.values["title"], .string("b"))
        context.merge(deleting(stored(7)))
        XCTAssertNil(context.updated[stored(7)])
        XCTAssertEqual(context.deleted[stored(7)], 0)
        context.merge(updating(stored(7), title: "c"))
        XCTAssertNil(context.updated[stored(7)], "a deleted object takes no more changes")
        XCTAssertEqual(context.storedIDs, [stored(7)])
    }
}
