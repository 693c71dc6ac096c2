import GRPCCore
import Testing
@testable import Ubiquity

/// `UbiquityError.kind` comes from the ErrorInfo reason first, the status code second: the three
/// ABORTED reasons are three different situations (docs/errors.md).
@Suite(.timeLimit(.minutes(1))) struct ErrorKindTests {
    @Test func abortedReasonsAreToldApart() {
        #expect(UbiquityError.kind(reason: "MERGE_CONFLICT", code: .aborted) == .conflict)
        #expect(UbiquityError.kind(reason: "KEY_VERSION_CONFLICT", code: .aborted) == .keyVersionConflict)
        #expect(UbiquityError.kind(reason: "TRANSITION_IN_PROGRESS", code: .aborted) == .transitionInProgress)
        #expect(UbiquityError.kind(reason: "STORE_CHANGED", code: .failedPrecondition) == .failedPrecondition)
        #expect(UbiquityError.kind(reason: nil, code: .unavailable) == .unavailable)
    }

    /// The account lifecycle's refusals (docs/errors.md): one kind each, whatever their codes.
    @Test func accountRefusalsAreTyped() {
        #expect(UbiquityError.kind(reason: "ACCOUNT_ARCHIVED", code: .failedPrecondition) == .accountArchived)
        #expect(UbiquityError.kind(reason: "ACCOUNT_NOT_ARCHIVED", code: .alreadyExists) == .accountNotArchived)
        #expect(UbiquityError.kind(reason: "ACCOUNT_BUSY", code: .failedPrecondition) == .accountBusy)
        #expect(UbiquityError.kind(reason: "DEFAULT_ACCOUNT", code: .failedPrecondition) == .defaultAccount)
    }
}
