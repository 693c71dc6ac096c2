import Foundation

/// `--exit-on-stdin-eof`: shut down gracefully once standard input reaches end of file.
///
/// A supervisor or test harness that starts ubiquityd with a pipe on its stdin and never writes
/// to it holds the pipe's write end open for as long as it lives; the kernel closes it when the
/// supervisor exits, however it exits (kill -9 included). So a server started this way cannot
/// outlive whoever started it — the orphaned test servers seen after interrupted test runs
/// came from harnesses killed before their teardown could stop them.
///
/// One thread blocked in `read(0)`: libuv could watch the pipe on the loop, but stdin may be a
/// file or a terminal, which uv_pipe/uv_poll do not handle alike, and a plain blocking read is
/// correct for every kind. Whatever is read is discarded.
enum StdinWatch {
    /// Calls `onEndOfFile` once, from a thread of its own, when a read of fd 0 returns 0 or fails
    /// with anything but EINTR. `onEndOfFile` must be thread-safe (`GRPCServer.beginShutdown` is).
    static func start(onEndOfFile: @escaping @Sendable () -> Void) {
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 512)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if n > 0 || (n < 0 && errno == EINTR) { continue }
                break
            }
            onEndOfFile()
        }
        thread.name = "ubq-stdin"
        thread.start()
    }
}
