import Foundation

/// Thread names as the kernel has them (what `top -H` and `perf` show), for tests of code that
/// names its threads.
public enum ThreadNames {
    /// The calling thread's name.
    public static var current: String {
        read("/proc/thread-self/comm") ?? "?"
    }

    /// The names of every thread of this process.
    public static var all: Set<String> {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(tasks.compactMap { read("/proc/self/task/\($0)/comm") })
    }

    private static func read(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
