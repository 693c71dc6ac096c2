import Foundation
import Logging

/// One JSON object per line on stderr: time, level, label, message, metadata. Values are strings;
/// callers never log secrets (tokens, API keys) — see docs/operations.md.
struct JSONLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    let label: String

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: String] = [
            "time": ISO8601DateFormatter.shared.string(from: Date()),
            "level": event.level.rawValue,
            "logger": label,
            "msg": event.message.description,
        ]
        for (k, v) in metadata { object[k] = v.description }
        if let extra = event.metadata { for (k, v) in extra { object[k] = v.description } }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        FileHandle.standardError.write(data)
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let shared: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }()
}
