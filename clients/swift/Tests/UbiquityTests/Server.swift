import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real ubiquityd on 127.0.0.1 with a fresh data directory, as tests/python's harness starts it:
/// `--port 0`, the port read from the one line it prints (`ubiquityd listening on 127.0.0.1:PORT`).
/// The binary is $UBIQUITYD (scripts/test sets it), else the repository's debug build.
///
/// Started with `--exit-on-stdin-eof` and a pipe on its stdin that this process holds and never
/// writes (as tests/python/ubiq_harness.py does, docs/testing.md): when the test process dies —
/// a time limit, Ctrl-C, a killed CI job — the kernel closes the pipe and the server drains and
/// exits instead of living on as an orphan. The `atexit` hook below covers only an orderly exit.
///
/// Started with posix_spawn rather than Foundation's Process: Process hands the child the test
/// runner's signal mask, in which SIGTERM is blocked, so the server would never see the SIGTERM
/// that asks it to drain. Here the child gets an empty mask and default dispositions, as
/// Python's subprocess gives it.
final class Server: @unchecked Sendable {
    // @unchecked: start/stop/kill are called by one test at a time; nothing is shared across tasks
    // while they run.
    let dataDir: URL
    let workDir: URL
    let interop: Bool
    /// More ubiquityd options (`--session-lifetime-seconds 2`, `--auth off`).
    let options: [String]
    private(set) var port = 0
    private var pid: pid_t = 0
    private var exitStatus: Int32?
    private var log: URL?
    /// The write end of the server's stdin pipe, held while it runs (-1: none).
    private var stdinPipe: Int32 = -1

    var target: String { "127.0.0.1:\(port)" }

    static func binary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["UBIQUITYD"] {
            return URL(fileURLWithPath: path)
        }
        // clients/swift/Tests/UbiquityTests/Server.swift → the repository root.
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../..")
        let candidate = repo.appendingPathComponent(".build/debug/ubiquityd").standardizedFileURL
        guard FileManager.default.isExecutableFile(atPath: candidate.path) else {
            throw ServerError("ubiquityd not found: set UBIQUITYD or build the server (swift build) at \(candidate.path)")
        }
        return candidate
    }

    /// A new server with its own temporary directory.
    init(interop: Bool = false, options: [String] = []) throws {
        workDir = FileManager.default.temporaryDirectory.appendingPathComponent("ubiq-swift-\(UUID().uuidString)")
        dataDir = workDir.appendingPathComponent("data")
        self.interop = interop
        self.options = options
        try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
    }

    /// Starts the process on `port` (0: any free port) and waits for its listening line.
    @discardableResult
    func start(port requested: Int = 0) async throws -> Server {
        let output = workDir.appendingPathComponent("output-\(UUID().uuidString).log")
        log = output
        let binary = try Self.binary().path
        let arguments = [
            binary, "--host", "127.0.0.1", "--port", "\(requested)", "--data-dir", dataDir.path, "--log-level", "info",
            "--exit-on-stdin-eof",
        ] + (interop ? ["--enable-interop-testing"] : []) + options
        (pid, stdinPipe) = try Self.spawn(arguments, output: output.path)
        Self.running.withLock { _ = $0.insert(pid) }
        exitStatus = nil
        let prefix = "ubiquityd listening on 127.0.0.1:"
        let line = try await pollUntil("ubiquityd prints its address", timeout: .seconds(30)) { () -> String? in
            if let status = self.reap() { throw ServerError("ubiquityd exited (\(status)): \(Self.text(output))") }
            return Self.text(output).split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init)
        }
        port = Int(line.dropFirst(prefix.count)) ?? 0
        #expect(port > 0)
        return self
    }

    /// The operator key the server wrote to its data directory on first start (docs/accounts.md).
    var operatorKey: String {
        get throws {
            try String(contentsOf: dataDir.appendingPathComponent("operator.key"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// SIGTERM (the server drains) and wait for the exit status.
    func stop() async throws -> Int32 {
        guard pid > 0 else { return 0 }
        if reap() == nil { signal(pid, SIGTERM) }
        do {
            return try await pollUntil("ubiquityd exits after SIGTERM", timeout: .seconds(30)) { self.reap() }
        } catch {
            throw ServerError("\(error); its output:\n\(log.map(Self.text) ?? "")")
        }
    }

    func kill() {
        defer { closeStdin() }
        guard pid > 0, reap() == nil else { return }
        signal(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        exitStatus = status
        Self.running.withLock { _ = $0.remove(pid) }
    }

    /// Closes this process's end of the server's stdin, as the kernel does when the test process
    /// dies: the server then drains and exits (`--exit-on-stdin-eof`).
    func closeStdin() {
        guard stdinPipe >= 0 else { return }
        close(stdinPipe)
        stdinPipe = -1
    }

    /// Waits for the server to exit by itself (after ``closeStdin()``); its exit code.
    func exited() async throws -> Int32 {
        do {
            return try await pollUntil("ubiquityd exits", timeout: .seconds(30)) { self.reap() }
        } catch {
            throw ServerError("\(error); its output:\n\(log.map(Self.text) ?? "")")
        }
    }

    /// Servers started and not yet seen to exit. When the test process exits with some still
    /// running (a test cut off by its time limit, a cleanup task that never got to run), the exit
    /// hook kills them: a ubiquityd outliving its test run would hold whatever descriptors it
    /// inherited and keep a CI step waiting.
    static let running: Mutex<Set<pid_t>> = {
        atexit {
            for pid in Server.running.withLock({ $0 }) { signal(pid, SIGKILL) }
        }
        return Mutex([])
    }()

    deinit {
        kill()
        try? FileManager.default.removeItem(at: workDir)
    }

    /// The exit code once the process has ended (reaped without blocking), else nil.
    private func reap() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        Self.running.withLock { _ = $0.remove(pid) }
        closeStdin()
        // WIFEXITED / WEXITSTATUS, which Swift does not import as functions.
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        exitStatus = code
        return code
    }

    /// The child's pid and the write end of its stdin pipe.
    private static func spawn(_ arguments: [String], output: String) throws -> (pid_t, Int32) {
        // Both ends close-on-exec, so no other child (openssl in the TLS tests, the next server)
        // inherits the write end and keeps the pipe open after this process is gone; dup2 onto
        // the child's stdin clears the flag there.
        // Tests run in parallel: without the lock, a server spawned by another test between
        // pipe() and fcntl() (or after its list of descriptors to close was taken) would inherit
        // this pipe's write end and keep this server's stdin open. (Glibc's pipe2 would set the
        // flag atomically, but Swift does not see it.)
        try spawning.withLock { _ in try spawnLocked(arguments, output: output) }
    }

    private static let spawning = Mutex(())

    private static func spawnLocked(_ arguments: [String], output: String) throws -> (pid_t, Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw ServerError("pipe: \(String(cString: strerror(errno)))") }
        for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var handedOver = false
        defer {
            close(ends[0])
            if !handedOver { close(ends[1]) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the test runner's: no pipe of `swift test` or of CI stays open in it.
        // (glibc's addclosefrom_np is not visible to Swift; a descriptor closed meanwhile is
        // skipped by posix_spawn.)
        #if os(Linux)
        for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap({ Int32($0) }) ?? [] where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        #endif
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, arguments[0], &actions, &attributes, &argv, environ)
        guard rc == 0 else { throw ServerError("posix_spawn \(arguments[0]): \(String(cString: strerror(rc)))") }
        handedOver = true
        return (pid, ends[1])
    }

    private static func text(_ path: URL) -> String {
        (try? String(contentsOf: path, encoding: .utf8)) ?? ""
    }
}

struct ServerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Polls `probe` until it returns a value (the event the test waits for), failing after `timeout`.
/// The bound is a safety net for a broken server, never a measurement.
@discardableResult
func pollUntil<T>(
    _ what: String, timeout: Duration = .seconds(20), _ probe: () async throws -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await probe() { return value }
        if ContinuousClock.now > deadline { throw ServerError("timed out waiting for: \(what)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// kill(2), outside `Server`, whose own `kill()` hides the C function's name.
private func signal(_ pid: pid_t, _ signal: Int32) {
    _ = kill(pid, signal)
}
