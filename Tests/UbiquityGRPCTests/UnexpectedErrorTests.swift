import Foundation
import Logging
import XCTest
@testable import UbiquityGRPC

/// An error that does not say which status it becomes reaches the client as UNKNOWN with a
/// generic message naming an error ID; its description goes only to the log, under that ID.
final class UnexpectedErrorTests: XCTestCase {
    private final class Captured: LogHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var records: [(String, Logger.Metadata)] = []
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lock.withLock { records.append(("\(event.message)", event.metadata ?? [:])) }
        }
        var logged: [(String, Logger.Metadata)] { lock.withLock { records } }
    }

    private struct SecretPathError: Error, CustomStringConvertible {
        var description: String { "open /var/lib/ubiquity/secret.sqlite failed" }
    }

    func testUnexpectedErrorIsUnknownWithAnIDAndTheCauseIsLoggedUnderIt() throws {
        let handler = Captured()
        let logger = Logger(label: "test") { _ in handler }
        let status = RPCError(converting: SecretPathError(), logger: logger)

        XCTAssertEqual(status.code, .unknown)
        XCTAssertNil(status.details)
        XCTAssertFalse(status.message.contains("secret"), status.message)
        let match = try XCTUnwrap(status.message.wholeMatch(of: /internal error \(id ([0-9a-f]{16})\)/))
        let id = String(match.1)
        XCTAssertTrue(status.cause is SecretPathError)

        let logged = handler.logged
        XCTAssertEqual(logged.count, 1)
        XCTAssertEqual(logged.first?.1["error_id"], .string(id))
        XCTAssertTrue("\(logged.first?.1["error"] ?? "")".contains("secret.sqlite"))
    }

    func testEachUnexpectedErrorGetsItsOwnID() {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let a = RPCError(converting: SecretPathError(), logger: logger).message
        let b = RPCError(converting: SecretPathError(), logger: logger).message
        XCTAssertNotEqual(a, b)
    }

    func testKnownErrorsAreNotLogged() {
        let handler = Captured()
        let logger = Logger(label: "test") { _ in handler }
        _ = RPCError(converting: RPCError(.notFound, "x"), logger: logger)
        _ = RPCError(converting: CancellationError(), logger: logger)
        XCTAssertTrue(handler.logged.isEmpty)
    }
}
