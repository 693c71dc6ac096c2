import Foundation

/// A fresh directory under the system's temporary directory, for one test: create it in
/// `setUp`, `remove()` it in `tearDown`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    /// Creates `<tmp>/<prefix>-<uuid>`.
    public init(prefix: String) throws {
        path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// `path/name`.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Deletes the directory and everything in it (best effort: a test's own failure matters more).
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
