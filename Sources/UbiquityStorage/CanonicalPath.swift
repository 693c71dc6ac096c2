import Foundation

/// A file's path with symlinks, `.` and `..` resolved, which keys `Store.openPaths` (one `Store`
/// per file in a process, rule 1): `realpath(3)` of the file, or of its folder when the file does
/// not exist yet (a store being created), plus its name.
///
/// Foundation's `URL.standardizedFileURL.resolvingSymlinksInPath()`, used before, was ~15% of a
/// store open's CPU in W6 (perf, docs/benchmarks.md "Cold calls, traced"); it stays as the fallback for a
/// folder that does not exist either (the open then fails on its own).
enum CanonicalPath {
    static func of(_ path: String) -> String {
        if let p = real(path) { return p }
        if let slash = path.lastIndex(of: "/") {
            let folder = slash == path.startIndex ? "/" : String(path[..<slash])
            if let f = real(folder) { return (f == "/" ? "" : f) + path[slash...] }
        } else if let f = real(".") {
            return f + "/" + path
        }
        return URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }

    private static func real(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}
