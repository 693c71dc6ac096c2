import Foundation
import Yams

/// One value a config file or the environment gives a setting, and where it came from (for
/// error messages and `--check-config`).
struct SettingValue: Equatable {
    var text: String
    var origin: String
}

/// An error in the configuration: names the key and, for a file, the line.
struct ConfigError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The config file: a YAML mapping of setting keys (the flag names without `--`) to scalars.
/// Flat on purpose: one key per flag, so a key is found by the same name in `--help`,
/// docs/operations.md and the environment (`UBIQUITY_` + the key in upper snake case).
enum ConfigFile {
    static func load(path: String) throws -> [String: SettingValue] {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ConfigError("cannot read config file \(path): \(error.localizedDescription)")
        }
        return try parse(text, path: path)
    }

    static func parse(_ text: String, path: String) throws -> [String: SettingValue] {
        let root: Node?
        do { root = try Yams.compose(yaml: text) } catch {
            throw ConfigError("\(path): not valid YAML: \(error)")
        }
        guard let root else { return [:] }  // an empty file (or only comments) sets nothing
        guard case .mapping(let mapping) = root else {
            throw ConfigError("\(path)\(line(root)): the config file must be a mapping of keys to values (key: value per line)")
        }
        var values: [String: SettingValue] = [:]
        for (keyNode, valueNode) in mapping {
            guard case .scalar(let key) = keyNode else {
                throw ConfigError("\(path)\(line(keyNode)): a key must be a plain name")
            }
            // (Yams already refuses a key given twice.)
            let origin = "\(path)\(line(keyNode))"
            guard case .scalar(let scalar) = valueNode else {
                throw ConfigError("\(origin): key '\(key.string)' needs a single value (a number, word or quoted string), not a list or mapping")
            }
            if scalar.tag.rawValue == Tag.Name.null.rawValue || (scalar.string.isEmpty && scalar.style == .plain) {
                throw ConfigError("\(origin): key '\(key.string)' has no value (remove or comment out the line to use the default)")
            }
            values[key.string] = SettingValue(text: scalar.string, origin: origin)
        }
        return values
    }

    private static func line(_ node: Node) -> String {
        node.mark.map { ":\($0.line)" } ?? ""
    }
}
