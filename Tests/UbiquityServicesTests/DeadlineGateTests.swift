import XCTest
@testable import UbiquityServices

final class DeadlineGateTests: XCTestCase {
    func testAGateOpenedBeforeTheWaitLetsItThroughAtOnce() async {
        let gate = DeadlineGate()
        gate.open()
        // An hour's deadline: only the open gate can end this wait.
        await gate.wait(seconds: 3600)
        XCTAssertTrue(gate.isOpen)
    }

    func testOpeningWhileATaskWaitsResumesIt() async {
        let gate = DeadlineGate()
        let waiter = Task { await gate.wait(seconds: 3600) }
        // Open until the waiter is through: an open before it parks is as good as one after.
        gate.open()
        await waiter.value
        XCTAssertTrue(gate.isOpen)
        gate.open()  // twice is a no-op
    }

    func testThePassedDeadlineRunsLateWhichOpensTheGate() async {
        let gate = DeadlineGate()
        let ran = DeadlineGate()  // opened by `late` only: it shows that `late` ran
        await gate.wait(seconds: 0, late: { ran.open(); gate.open() })
        XCTAssertTrue(ran.isOpen)
        XCTAssertTrue(gate.isOpen)
    }

    func testWithoutLateTheDeadlineOpensTheGate() async {
        let gate = DeadlineGate()
        await gate.wait(seconds: 0)
        XCTAssertTrue(gate.isOpen)
    }
}
