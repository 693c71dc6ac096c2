import Foundation
import Testing

/// The servers these tests start cannot outlive the test run (`Server`: `--exit-on-stdin-eof`
/// and a pipe on stdin that only this process holds).
@Suite(.timeLimit(.minutes(1))) struct ServerLifetimeTests {
    /// Closing the held end is what the kernel does when the test process dies, however it dies:
    /// the server drains and exits by itself, with status 0. (With stdin at end of file from the
    /// start, e.g. /dev/null, it would have exited before printing its address; without the flag
    /// it would not exit here.)
    @Test func theServerExitsWhenTheTestProcessLetsGoOfItsStdin() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        server.closeStdin()
        #expect(try await server.exited() == 0)
    }
}
