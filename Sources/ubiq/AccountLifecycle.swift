import ArgumentParser
import Foundation
import UbiquityProtos

// `ubiq account archive|restore|delete` (operator; docs/accounts.md "Archive, restore, delete").
extension AccountCommand {
    static func show(state a: Ubiquity_V1_Account) -> String {
        let state: String = switch a.state {
        case .active: "active"
        case .archived: "archived"
        case .archiving: "archiving"
        case .restoring: "restoring"
        default: "\(a.state)"
        }
        return "\(show(a))  \(state)"
    }

    struct Archive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Archive an account: its sessions end, its stores move to its archive, every call and sign-in for it fails as for an unknown account.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The account's ID.") var accountID: String
        func run() async throws {
            var r = Ubiquity_V1_ArchiveAccountRequest()
            r.accountID = accountID
            print(AccountCommand.show(state: try await op.call(server, "Accounts/ArchiveAccount", r, Ubiquity_V1_Account.self)))
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restore an archived account: its stores come back unchanged and its API keys sign in again.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The account's ID.") var accountID: String
        func run() async throws {
            var r = Ubiquity_V1_RestoreAccountRequest()
            r.accountID = accountID
            print(AccountCommand.show(state: try await op.call(server, "Accounts/RestoreAccount", r, Ubiquity_V1_Account.self)))
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an account and everything of it (stores, archive, key-value entries, history, API keys, sessions); prints what was removed.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The account's ID.") var accountID: String
        @Flag(help: "Required: the deletion cannot be undone.") var yes = false
        func run() async throws {
            guard yes else { throw CLIError("deleting an account removes all of its data for good: add --yes") }
            var r = Ubiquity_V1_DeleteAccountRequest()
            r.accountID = accountID
            let res = try await op.call(server, "Accounts/DeleteAccount", r, Ubiquity_V1_DeleteAccountResponse.self)
            print("deleted \(accountID): \(res.storesRemoved) stores, \(res.archivedStoresRemoved) archived stores, "
                  + "\(res.keyValueEntriesRemoved) key-value entries, \(res.apiKeysRemoved) API keys, "
                  + "\(res.sessionsRemoved) sessions, \(res.bytesRemoved) bytes")
        }
    }
}
