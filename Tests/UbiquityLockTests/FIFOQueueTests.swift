import UbiquityLock
import XCTest

final class FIFOQueueTests: XCTestCase {
    func testFirstInFirstOutAcrossGrowthAndWrapAround() {
        var q = FIFOQueue<Int>()
        var expected: [Int] = []
        var next = 0
        // Interleave pushes and pops so the ring wraps before and after each growth.
        for round in 0..<200 {
            for _ in 0..<(round % 7 + 1) { q.append(next); expected.append(next); next += 1 }
            for _ in 0..<(round % 5) {
                XCTAssertEqual(q.first, expected.first)
                XCTAssertEqual(q.popFirst(), expected.isEmpty ? nil : expected.removeFirst())
            }
            XCTAssertEqual(q.count, expected.count)
        }
        while let v = q.popFirst() { XCTAssertEqual(v, expected.removeFirst()) }
        XCTAssertTrue(expected.isEmpty)
        XCTAssertTrue(q.isEmpty)
        XCTAssertNil(q.popFirst())
    }

    func testAPoppedElementIsReleasedAtOnce() {
        final class Box {}
        var q = FIFOQueue<Box>()
        weak var weakBox: Box?
        do {
            let box = Box()
            weakBox = box
            q.append(box)
            q.append(Box())
        }
        _ = q.popFirst()
        XCTAssertNil(weakBox, "the queue still holds a popped element")
        q.removeAll()
        XCTAssertTrue(q.isEmpty)
    }
}
