import Foundation
import UbiquityLock

/// Test-only kill points (docs/testing.md): with `UBIQUITYD_TEST_CRASH_AT=<step>[:<n>]` the
/// process kills itself with SIGKILL the n-th time (default 1) it reaches `<step>`, so the crash
/// tests stop a transition exactly between two of its steps instead of guessing with a timer.
/// Unset (always, outside tests) it costs one comparison per step of a transition.
enum CrashPoint {
    private static let target: (step: String, hit: Int)? = {
        guard let v = ProcessInfo.processInfo.environment["UBIQUITYD_TEST_CRASH_AT"], !v.isEmpty else { return nil }
        let parts = v.split(separator: ":", maxSplits: 1).map(String.init)
        return (parts[0], parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
    }()
    private static let hits = Lock(0)

    static func reach(_ step: String) {
        guard let t = target, t.step == step else { return }
        if hits.withLock({ $0 += 1; return $0 }) >= t.hit { kill(getpid(), SIGKILL) }
    }
}
