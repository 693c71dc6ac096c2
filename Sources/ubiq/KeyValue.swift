import ArgumentParser
import Foundation
import UbiquityProtos

/// `ubiq kv`: the account's key-value store (docs/keyvalue.md).
struct KeyValueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kv", abstract: "Get, set, delete and list the account's key-value entries.",
        discussion: "Values are bytes: given and printed as UTF-8 text, or as base64 with --base64.",
        subcommands: [Get.self, Set.self, Delete.self, List.self])

    /// A precondition from `--expected-version` / `--create-only`.
    static func precondition(expected: Int64?, createOnly: Bool) throws -> Ubiquity_V1_KeyValuePrecondition? {
        var p = Ubiquity_V1_KeyValuePrecondition()
        switch (expected, createOnly) {
        case (nil, false): return nil
        case (let v?, false): p.expectedVersion = v
        case (nil, true): p.mustNotExist = true
        case (_?, true): throw ValidationError("give --expected-version or --create-only, not both")
        }
        return p
    }

    /// A value as the user reads it: its UTF-8 text, or base64 when asked or when it is not
    /// printable text (control characters would garble the terminal).
    static func show(_ value: Data, base64: Bool) -> String {
        if !base64, let s = String(data: value, encoding: .utf8),
           !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" }) { return s }
        return value.base64EncodedString()
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a key's value (its version on stderr).")
        @OptionGroup var server: ServerOptions
        @Flag(help: "Print the value as base64.") var base64 = false
        @Argument(help: "The key.") var key: String
        func run() async throws {
            var r = Ubiquity_V1_KeyValueGetRequest()
            r.key = key
            let e = try await server.connect().unary("KeyValue/Get", r, Ubiquity_V1_KeyValueEntry.self)
            print(KeyValueCommand.show(e.value, base64: base64))
            FileHandle.standardError.write(Data("version \(e.version)\n".utf8))
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a key's value.",
            discussion: "Example: ubiq kv set settings.theme dark --expected-version 3")
        @OptionGroup var server: ServerOptions
        @Option(help: "Only if the key is at this version (compare-and-set).") var expectedVersion: Int64?
        @Flag(help: "Only if the key is not set.") var createOnly = false
        @Flag(help: "The value is base64.") var base64 = false
        @Option(help: "The device making the change.") var author = "ubiq"
        @Argument(help: "The key.") var key: String
        @Argument(help: "The value.") var value: String
        func run() async throws {
            var r = Ubiquity_V1_KeyValueSetRequest()
            r.key = key
            if base64 {
                guard let d = Data(base64Encoded: value) else { throw CLIError("the value is not base64") }
                r.value = d
            } else {
                r.value = Data(value.utf8)
            }
            if let p = try KeyValueCommand.precondition(expected: expectedVersion, createOnly: createOnly) { r.precondition = p }
            r.author = author
            let w = try await server.connect().unary("KeyValue/Set", r, Ubiquity_V1_KeyValueWriteResponse.self)
            print("set \(key) → version \(w.version)")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a key.")
        @OptionGroup var server: ServerOptions
        @Option(help: "Only if the key is at this version.") var expectedVersion: Int64?
        @Option(help: "The device making the change.") var author = "ubiq"
        @Argument(help: "The key.") var key: String
        func run() async throws {
            var r = Ubiquity_V1_KeyValueDeleteRequest()
            r.key = key
            if let p = try KeyValueCommand.precondition(expected: expectedVersion, createOnly: false) { r.precondition = p }
            r.author = author
            let w = try await server.connect().unary("KeyValue/Delete", r, Ubiquity_V1_KeyValueWriteResponse.self)
            print(w.existed ? "deleted \(key) → version \(w.version)" : "\(key) was not set")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (all pages), with their versions, sizes and values; usage on stderr.")
        @OptionGroup var server: ServerOptions
        @Option(help: "Only keys starting with this.") var prefix = ""
        @Flag(help: "Leave the values out.") var keysOnly = false
        @Flag(help: "Print values as base64.") var base64 = false
        func run() async throws {
            let s = try await server.connect()
            var r = Ubiquity_V1_KeyValueListRequest()
            r.prefix = prefix
            r.keysOnly = keysOnly
            var last = Ubiquity_V1_KeyValueListResponse()
            repeat {
                last = try await s.unary("KeyValue/List", r, Ubiquity_V1_KeyValueListResponse.self)
                for e in last.entries {
                    let value = keysOnly ? "" : "  " + KeyValueCommand.show(e.value, base64: base64)
                    print("\(e.key)  v\(e.version)  \(e.valueSize) B\(value)")
                }
                r.pageToken = last.nextPageToken
            } while !last.nextPageToken.isEmpty
            let u = last.usage
            FileHandle.standardError.write(Data("\(u.keys) of \(u.maxKeys) keys, \(u.bytes) of \(u.maxBytes) bytes\n".utf8))
        }
    }
}
