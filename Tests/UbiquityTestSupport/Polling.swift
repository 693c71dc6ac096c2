import Foundation

/// Polls `condition` every `interval` seconds until it holds; false after `seconds`.
///
/// Only for state that changes without any event a test could wait on (a kernel socket
/// buffer filling, a statistic the code under test updates on its own schedule). Every use says
/// why no event exists. Ordering against the code under test uses `EventCounter`.
public func pollUntil(seconds: Double = 10, interval: Double = 0.005, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        if try condition() { return true }
        if Date() >= deadline { return false }
        Thread.sleep(forTimeInterval: interval)
    }
}

/// The async form of `pollUntil`, for conditions checked from async tests.
public func pollUntil(seconds: Double = 10, interval: Double = 0.005, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        if try await condition() { return true }
        if Date() >= deadline { return false }
        try? await Task.sleep(for: .seconds(interval))
    }
}
