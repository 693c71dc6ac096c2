import Foundation
import Testing

/// The README's walkthrough (examples/Walkthrough) runs to the end against a real server.
@Suite(.timeLimit(.minutes(2))) struct WalkthroughTests {
    /// `$UBIQUITY_WALKTHROUGH`, else beside this test binary (`swift build --build-tests` builds
    /// every product of the package into the same directory).
    static func binary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["UBIQUITY_WALKTHROUGH"] {
            return URL(fileURLWithPath: path)
        }
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var dir = me.deletingLastPathComponent()
        // On Linux the test binary is <bin>/UbiquityPackageTests.xctest; elsewhere a bundle deeper.
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("ubiquity-walkthrough")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        throw ServerError("ubiquity-walkthrough not built beside \(me.path): run `swift build --build-tests` first")
    }

    @Test func walkthroughRunsToTheEnd() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let output = server.workDir.appendingPathComponent("walkthrough.log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let p = Process()
        p.executableURL = try Self.binary()
        p.arguments = [server.target, try await makeApiKey(server)]
        p.standardOutput = try FileHandle(forWritingTo: output)
        p.standardError = try FileHandle(forWritingTo: output)
        try p.run()
        defer { if p.isRunning { p.terminate() } }  // after a timeout: no walkthrough left behind
        try await pollUntil("the walkthrough exits", timeout: .seconds(60)) { p.isRunning ? nil : true }
        let text = try String(contentsOf: output, encoding: .utf8)
        #expect(p.terminationStatus == 0, "\(text)")
        #expect(text.contains("adults: [\"Ann\"]"))
        #expect(text.contains("conflict on x-ubiquity://"))
        #expect(text.contains("age at the old token: 30"))
        #expect(text.contains("bad predicate: PREDICATE_SYNTAX fetch.predicate"))
        #expect(text.hasSuffix("walkthrough done\n"))
    }
}
