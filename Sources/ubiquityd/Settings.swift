import ArgumentParser
import Foundation

/// One setting of ubiquityd: a flag, its config-file key and its environment variable.
///
/// The table is read from the command's own ArgumentParser declarations (the `--help` model,
/// through ArgumentParser's `--experimental-dump-help`), so a flag added to `Ubiquityd` or
/// `TuningOptions` has its key and environment variable without anything else to update, and
/// the flag, key, variable, help and group cannot drift apart. `ubiquityd --list-settings`
/// prints the table; tests/python/test_config.py checks docs/operations.md lists every key.
struct Setting: Equatable {
    /// The long flag name without `--`; also the config-file key.
    let key: String
    /// `true`: a flag without a value (`--allow-plaintext`); the file and environment say true/false.
    let isFlag: Bool
    let defaultValue: String?
    let help: String
    /// The `--help` section: "essential" or the option group's title.
    let group: String

    var flag: String { "--\(key)" }
    var environmentVariable: String { Setting.environmentVariable(for: key) }

    static func environmentVariable(for key: String) -> String {
        "UBIQUITY_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

enum SettingsTable {
    /// Options about the configuration itself, not settings of the server.
    /// And one-shot actions (`ActionOptions`), which a config file must not repeat at every start.
    static let meta: Set<String> = ["config", "check-config", "list-settings", "restore-from", "help", "version"]

    static let all: [Setting] = load()

    private struct Dump: Decodable {
        struct Command: Decodable { let arguments: [Argument] }
        struct Argument: Decodable {
            struct Name: Decodable { let kind: String; let name: String }
            let kind: String
            let names: [Name]?
            let defaultValue: String?
            let abstract: String?
            let sectionTitle: String?
        }
        let command: Command
    }

    private static func load() -> [Setting] {
        let message: String
        do {
            _ = try Ubiquityd.parseAsRoot(["--experimental-dump-help"])
            preconditionFailure("ArgumentParser no longer answers --experimental-dump-help with the command's description")
        } catch {
            message = Ubiquityd.fullMessage(for: error)
        }
        guard let dump = try? JSONDecoder().decode(Dump.self, from: Data(message.utf8)) else {
            preconditionFailure("cannot read ArgumentParser's description of ubiquityd's flags")
        }
        return dump.command.arguments.compactMap { a in
            guard let long = a.names?.first(where: { $0.kind == "long" })?.name, !meta.contains(long) else { return nil }
            return Setting(key: long, isFlag: a.kind == "flag", defaultValue: a.defaultValue, help: a.abstract ?? "",
                           group: a.sectionTitle ?? "essential")
        }
    }

    static func setting(_ key: String) -> Setting? { all.first { $0.key == key } }
}

/// The command line with the environment and the config file folded in:
/// flag > environment > file > default. What the command line does not set and the
/// environment or the file does is appended as flags, so ArgumentParser parses and validates
/// every value the same way whatever its source, and `origins` says where each came from.
struct LayeredArguments {
    var arguments: [String]
    /// key → where its value came from, for the settings not left at their default.
    var origins: [String: SettingValue] = [:]
    var configPath: String?
    /// UBIQUITY_* variables that name no setting (a typo, or another tool's).
    var unknownEnvironment: [String] = []

    init(commandLine: [String], environment: [String: String], table: [Setting] = SettingsTable.all) throws {
        arguments = commandLine
        let given = Set(commandLine.prefix { $0 != "--" }.compactMap { arg -> String? in
            guard arg.hasPrefix("--") else { return nil }
            return String(arg.dropFirst(2).split(separator: "=", maxSplits: 1).first ?? "")
        })
        let byKey = Dictionary(uniqueKeysWithValues: table.map { ($0.key, $0) })

        // Unknown UBIQUITY_* variables are only reported (--check-config): other tools share the
        // prefix (scripts/test exports UBIQUITY_LOAD to every server it starts).
        let known = Set(table.map(\.environmentVariable) + [Setting.environmentVariable(for: "config")])
        unknownEnvironment = environment.keys.filter { $0.hasPrefix("UBIQUITY_") && !known.contains($0) }.sorted()

        configPath = Self.commandLineValue("config", in: commandLine) 
            ?? environment[Setting.environmentVariable(for: "config")].flatMap { $0.isEmpty ? nil : $0 }
        var fileValues: [String: SettingValue] = [:]
        if let configPath {
            fileValues = try ConfigFile.load(path: configPath)
            for (key, value) in fileValues.sorted(by: { $0.key < $1.key }) where byKey[key] == nil {
                let hint = byKey[key.replacingOccurrences(of: "_", with: "-")].map { " (did you mean '\($0.key)'?)" } ?? ""
                throw ConfigError("\(value.origin): unknown key '\(key)'\(hint); ubiquityd --list-settings lists the keys")
            }
        }

        for setting in table {
            if given.contains(setting.key) {
                origins[setting.key] = SettingValue(text: "", origin: "command line")
                continue
            }
            let name = setting.environmentVariable
            // An empty variable counts as unset, so a container image's ENV default can be cleared
            // (docker run -e UBIQUITY_TLS_CERT=).
            let fromEnvironment = environment[name].flatMap { $0.isEmpty ? nil : SettingValue(text: $0, origin: "environment \(name)") }
            let value = fromEnvironment ?? fileValues[setting.key]
            guard let value else { continue }
            if setting.isFlag {
                guard let on = Self.bool(value.text) else {
                    throw ConfigError("\(value.origin): '\(setting.key)' must be true or false, not '\(value.text)'")
                }
                origins[setting.key] = value
                if on { arguments.append(setting.flag) }
            } else {
                origins[setting.key] = value
                // --key=value: a value starting with '-' stays a value.
                arguments.append("\(setting.flag)=\(value.text)")
            }
        }
    }

    private static func commandLineValue(_ key: String, in args: [String]) -> String? {
        for (i, arg) in args.enumerated() {
            if arg == "--" { return nil }
            if arg == "--\(key)", i + 1 < args.count { return args[i + 1] }
            if arg.hasPrefix("--\(key)=") { return String(arg.dropFirst(key.count + 3)) }
        }
        return nil
    }

    private static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0": false
        default: nil
        }
    }

    /// ArgumentParser names the flag (`--port`); add where a value it rejects came from.
    func annotate(_ message: String) -> String {
        // Only the error's own line: the usage lines below it name every flag.
        let errorLine = message.split(separator: "\n").first.map(String.init) ?? message
        let sources = origins.keys.sorted().compactMap { key -> String? in
            guard let o = origins[key], o.origin != "command line", errorLine.contains("--\(key)") else { return nil }
            return "'\(key)' = '\(o.text)' from \(o.origin)"
        }
        guard !sources.isEmpty else { return message }
        let rest = message.dropFirst(errorLine.count)
        return errorLine + " (" + sources.joined(separator: "; ") + ")" + rest
    }
}
