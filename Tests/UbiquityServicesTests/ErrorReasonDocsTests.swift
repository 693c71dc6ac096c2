import Foundation
import SwiftProtobuf
import XCTest
import UbiquityGRPC
import UbiquityProtos
@testable import UbiquityServices

/// docs/errors.md and `ErrorReason` tell the same story: every reason is documented, every
/// documented reason exists, and every reason is produced somewhere in the services.
final class ErrorReasonDocsTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The reasons in the first column of the "## Reasons" table (`A` / `B` and `A`, `B` list several).
    private func documentedReasons() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("docs/errors.md"), encoding: .utf8)
        let section = try XCTUnwrap(text.components(separatedBy: "\n## Reasons\n").last)
        var reasons = Set<String>()
        for line in section.split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("| `") else { continue }
            let first = line.split(separator: "|", omittingEmptySubsequences: true)[0]
            for m in first.matches(of: /`([A-Z_]+)`/) { reasons.insert(String(m.1)) }
        }
        return reasons
    }

    func testEveryReasonIsDocumentedAndEveryDocumentedReasonExists() throws {
        let documented = try documentedReasons()
        let declared = Set(ErrorReason.allCases.map(\.rawValue))
        XCTAssertEqual(declared.subtracting(documented).sorted(), [], "reasons missing from docs/errors.md")
        XCTAssertEqual(documented.subtracting(declared).sorted(), [], "documented reasons ErrorReason does not have")
    }

    /// A reason is produced where it is passed as `reason: .x` (or a default `reason: ErrorReason = .x`),
    /// assigned (`reason = .x`) or is the second element of a `(code, reason)` pair, in a source file of the services other
    /// than the enum's own.
    func testEveryReasonIsProducedSomewhere() throws {
        let dir = root.appendingPathComponent("Sources/UbiquityServices")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") && $0 != "ErrorReason.swift" }
        let sources = try files.map { try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8) }.joined(separator: "\n")
        for reason in ErrorReason.allCases {
            let name = "\(reason)"
            let uses = sources.matches(of: try Regex("(reason: (ErrorReason = )?|reason = |\\(\\.[a-zA-Z]+, )\\.`?\(name)`?\\b"))
            XCTAssertFalse(uses.isEmpty, "ErrorReason.\(name) (\(reason.rawValue)) is never produced")
        }
    }

    /// An error the services do not know is UNKNOWN with an error ID, not its Swift description,
    /// and still carries ErrorInfo (reason UNKNOWN) like every status of these services.
    func testUnexpectedErrorIsUnknownWithAnErrorID() throws {
        struct Leaky: Error, CustomStringConvertible { var description: String { "SELECT * FROM secret_table" } }
        let e = ServiceErrors.rpcError(Leaky())
        XCTAssertEqual(e.code, .unknown)
        XCTAssertNotNil(e.message.wholeMatch(of: /internal error \(id [0-9a-f]{16}\)/), e.message)
        XCTAssertTrue(e.cause is Leaky)
        let status = try Google_Rpc_Status(serializedBytes: try XCTUnwrap(e.details))
        XCTAssertEqual(status.message, e.message)
        let info = try XCTUnwrap(status.details.compactMap { try? Google_Rpc_ErrorInfo(unpackingAny: $0) }.first)
        XCTAssertEqual(info.reason, "UNKNOWN")
    }
}
