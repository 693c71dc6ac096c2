import ArgumentParser
import Foundation
import UbiquityProtos

/// `ubiq admin`: operator commands (docs/operations.md "Back up and restore"); they send the
/// operator key (`--operator-key-file`, default `<data-dir>/operator.key`).
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin", abstract: "Operator commands: online backup and restore.",
        discussion: """
            Backup directories are paths on the server's machine: the server writes and reads them. \
            A full restore is offline: `ubiquityd --data-dir NEW --restore-from DIR`.
            """,
        subcommands: [Backup.self, Restore.self])

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Back up every store (with accounts and key-value data), or one store, while the server keeps serving.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Option(help: "Backup directory on the server (absolute; new or empty).") var to: String
        @Option(help: "Back up only this store (its ID).") var store: String?
        func run() async throws {
            var r = Ubiquity_V1_BackupRequest()
            r.directory = try AdminCommand.absolute(to)
            r.storeID = store ?? ""
            let m = try await op.call(server, "Admin/Backup", r, Ubiquity_V1_BackupManifest.self)
            for s in m.stores {
                print("\(s.storeID)  \(s.account)/\(s.name)  generation \(s.generation)  \(s.sizeBytes) bytes  sha256 \(s.sha256.prefix(16))…")
            }
            let extra = !m.databases.isEmpty ? " (with the accounts, store names and key-value data: restorable with ubiquityd --restore-from)" : ""
            print("backup of \(m.stores.count) store\(m.stores.count == 1 ? "" : "s") in \(m.directory)\(extra)")
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore one store of a backup into the running server (closed and replaced, with a new epoch).")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Option(help: "Backup directory on the server (absolute; a finished backup, with its manifest).") var from: String
        @Option(help: "The store to restore (its ID); may be left out if the backup holds one store.") var store: String?
        @Flag(help: "Replace the store if it exists in the server (its current contents are lost).") var replace = false
        func run() async throws {
            var r = Ubiquity_V1_RestoreStoreRequest()
            r.directory = try AdminCommand.absolute(from)
            r.storeID = store ?? ""
            r.replaceExisting = replace
            let res = try await op.call(server, "Admin/RestoreStore", r, Ubiquity_V1_RestoreStoreResponse.self)
            print("restored store \(res.storeID) at generation \(res.generation)")
        }
    }

    /// The server resolves the path, not this shell: a relative one is made absolute here, which
    /// is right when both run on the same machine (the usual case) and refused by the server otherwise.
    static func absolute(_ path: String) throws -> String {
        if path.hasPrefix("/") { return path }
        return URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL.path
    }
}
