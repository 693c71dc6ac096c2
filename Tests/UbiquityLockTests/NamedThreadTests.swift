import UbiquityLock
import UbiquityTestSupport
import XCTest

final class NamedThreadTests: XCTestCase {
    func testTheThreadRunsUnderItsNameAndJoins() {
        let seen = Lock<[String]>([])
        let ran = EventCounter()
        let names = ["ubq-test", "a-name-longer-than-fifteen-bytes", "ünïcode-nämë"]
        let threads = names.map { name in
            NamedThread(name: name) {
                seen.withLock { $0.append(ThreadNames.current) }
                ran.signal()
            }
        }
        XCTAssertTrue(ran.wait(for: names.count))
        for t in threads { t.join(); t.join() }  // a second join returns at once
        // Linux keeps 15 bytes; a name is cut at a character boundary, never inside one.
        XCTAssertEqual(Set(seen.withLock { $0 }), ["ubq-test", "a-name-longer-t", "ünïcode-näm"])
    }
}
