import ArgumentParser
import Foundation
import SwiftProtobuf
import UbiquityProtos

/// First use without ceremony (docs/accounts.md, "Local use"): on the server's own machine,
/// with no --token, ubiq reads the operator key the server wrote to <data-dir>/operator.key,
/// creates an API key for the default account, signs in, and caches the key and the session in
/// <data-dir>/ubiq-session.json (mode 0600) for the next commands.
struct LocalSignIn {
    let session: Session
    let dataDir: String
    let host: String

    struct Cache: Codable { var apiKey: String; var token: String; var expiresAtMicros: Int64 }
    var cachePath: String { dataDir + "/ubiq-session.json" }

    func token() async throws -> String {
        let cache = (try? Data(contentsOf: URL(fileURLWithPath: cachePath))).flatMap { try? JSONDecoder().decode(Cache.self, from: $0) }
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        // a minute of margin, so a command started now does not run into the expiry
        if let c = cache, c.expiresAtMicros - 60_000_000 > now { return c.token }
        guard ["127.0.0.1", "::1", "localhost"].contains(host) else {
            throw CLIError("no credentials: pass --token (or UBIQ_TOKEN) with a session token from `ubiq account signin`")
        }
        let apiKey: String
        if let c = cache {
            apiKey = c.apiKey
        } else {
            let op = try OperatorKey.read(nil, dataDir: dataDir)
            var r = Ubiquity_V1_CreateApiKeyRequest()
            r.accountID = "default"
            r.scope = .readWrite
            r.label = "ubiq (local)"
            apiKey = try await session.operatorCall("Accounts/CreateApiKey", r, Ubiquity_V1_CreateApiKeyResponse.self, key: op).secret
        }
        var s = Ubiquity_V1_SignInRequest()
        s.apiKey = apiKey
        s.deviceID = "ubiq@" + ProcessInfo.processInfo.hostName
        let res = try await session.unary("Accounts/SignIn", s, Ubiquity_V1_SignInResponse.self)
        let data = try JSONEncoder().encode(Cache(apiKey: apiKey, token: res.sessionToken, expiresAtMicros: res.expiresAtMicros))
        if FileManager.default.createFile(atPath: cachePath, contents: data, attributes: [.posixPermissions: 0o600]) {
            _ = chmod(cachePath, 0o600)
        }
        return res.sessionToken
    }
}

enum OperatorKey {
    static func read(_ path: String?, dataDir: String) throws -> String {
        let p = path ?? dataDir + "/operator.key"
        guard let text = try? String(contentsOfFile: p, encoding: .utf8) else {
            throw CLIError("cannot read the operator key at \(p): pass --operator-key-file, or --data-dir of the server (it writes operator.key on first start)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension Session {
    func operatorCall<Req: Message, Res: Message>(_ method: String, _ request: Req, _ type: Res.Type, key: String) async throws -> Res {
        var s = self
        s.credentials = [("authorization", "Bearer " + key)]
        return try await s.unary(method, request, type)
    }
}

struct OperatorOptions: ParsableArguments {
    @Option(help: "File holding the operator key (default: <data-dir>/operator.key).") var operatorKeyFile: String?

    /// One operator call: connects without signing in and sends the operator key.
    func call<Req: Message, Res: Message>(_ server: ServerOptions, _ method: String, _ request: Req, _ type: Res.Type) async throws -> Res {
        let s = try await server.connect(authenticate: false)
        return try await s.operatorCall(method, request, type, key: OperatorKey.read(operatorKeyFile, dataDir: server.dataDir))
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account", abstract: "Accounts, API keys and sign-in (operator; docs/accounts.md).",
        subcommands: [Create.self, List.self, Get.self, KeyCommand.self, SignIn.self, Archive.self, Restore.self, Delete.self])

    static func show(_ a: Ubiquity_V1_Account) -> String { "\(a.accountID)  \(a.displayName)" }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an account (its ID is printed).")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Option(help: "A label for operators.") var displayName = ""
        func run() async throws {
            var r = Ubiquity_V1_CreateAccountRequest()
            r.displayName = displayName
            print(AccountCommand.show(try await op.call(server, "Accounts/CreateAccount", r, Ubiquity_V1_Account.self)))
        }
    }
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the accounts.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        func run() async throws {
            var req = Ubiquity_V1_ListAccountsRequest()
            req.pageSize = 1000
            repeat {
                let r = try await op.call(server, "Accounts/ListAccounts", req, Ubiquity_V1_ListAccountsResponse.self)
                for a in r.accounts { print(AccountCommand.show(a)) }
                req.pageToken = r.nextPageToken
            } while !req.pageToken.isEmpty
        }
    }
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one account.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The account's ID.") var accountID: String
        func run() async throws {
            var r = Ubiquity_V1_GetAccountRequest()
            r.accountID = accountID
            print(AccountCommand.show(try await op.call(server, "Accounts/GetAccount", r, Ubiquity_V1_Account.self)))
        }
    }
    struct KeyCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "key", abstract: "Create and revoke API keys.", subcommands: [KeyCreate.self, KeyRevoke.self])
    }
    struct KeyCreate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Create an API key; its secret is printed once.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The account's ID.") var accountID: String
        @Option(help: "read-write, read-only or store:<name>.") var scope = "read-write"
        @Option(help: "A label.") var label = ""
        func run() async throws {
            var r = Ubiquity_V1_CreateApiKeyRequest()
            r.accountID = accountID
            r.label = label
            switch scope {
            case "read-write": r.scope = .readWrite
            case "read-only": r.scope = .readOnly
            case let s where s.hasPrefix("store:"): r.scope = .oneStore; r.storeName = String(s.dropFirst(6))
            default: throw ValidationError("--scope must be read-write, read-only or store:<name>")
            }
            let res = try await op.call(server, "Accounts/CreateApiKey", r, Ubiquity_V1_CreateApiKeyResponse.self)
            print(res.secret)
        }
    }
    struct KeyRevoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke an API key and end its sessions.")
        @OptionGroup var server: ServerOptions
        @OptionGroup var op: OperatorOptions
        @Argument(help: "The key's ID (the 16 hex digits after ubk_).") var keyID: String
        func run() async throws {
            var r = Ubiquity_V1_RevokeApiKeyRequest()
            r.keyID = keyID
            let res = try await op.call(server, "Accounts/RevokeApiKey", r, Ubiquity_V1_RevokeApiKeyResponse.self)
            print("revoked; \(res.sessionsRevoked) session(s) ended")
        }
    }
    struct SignIn: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "signin", abstract: "Sign in with an API key; prints the session token (use as --token or UBIQ_TOKEN).")
        @OptionGroup var server: ServerOptions
        @Option(help: "The API key (or set UBIQ_API_KEY).") var apiKey: String?
        @Option(help: "This device's ID.") var deviceID = "ubiq@" + ProcessInfo.processInfo.hostName
        func run() async throws {
            guard let apiKey = apiKey ?? ProcessInfo.processInfo.environment["UBIQ_API_KEY"] else { throw ValidationError("--api-key (or UBIQ_API_KEY) is required") }
            var r = Ubiquity_V1_SignInRequest()
            r.apiKey = apiKey
            r.deviceID = deviceID
            let s = try await server.connect(authenticate: false)
            let res = try await s.unary("Accounts/SignIn", r, Ubiquity_V1_SignInResponse.self)
            print(res.sessionToken)
        }
    }
}
