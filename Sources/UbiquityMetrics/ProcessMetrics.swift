import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process_* metrics every Prometheus client library exports, read from /proc at scrape time.
public enum ProcessMetrics {
    public static func register(in exporter: MetricsExporter) {
        let rss = exporter.gauge("process_resident_memory_bytes")
        let vsize = exporter.gauge("process_virtual_memory_bytes")
        let fds = exporter.gauge("process_open_fds")
        let maxFDs = exporter.gauge("process_max_fds")
        let cpu = exporter.sampledCounter("process_cpu_seconds_total")
        exporter.gauge("process_start_time_seconds").set(Date().timeIntervalSince1970)
        exporter.addSampler {
            let (virtual, resident) = memory()
            vsize.set(Double(virtual))
            rss.set(Double(resident))
            fds.set(Double(openFileDescriptors()))
            var limit = rlimit()
            if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.set(Double(limit.rlim_cur)) }
            var usage = rusage()
            if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
                cpu.set(total: seconds(usage.ru_utime) + seconds(usage.ru_stime))
            }
        }
    }

    private static func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }

    /// Virtual and resident bytes from /proc/self/statm (first two fields, in pages).
    static func memory() -> (UInt64, UInt64) {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return (0, 0) }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let size = UInt64(fields[0]), let resident = UInt64(fields[1]) else { return (0, 0) }
        let page = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        return (size * page, resident * page)
    }

    /// Entries of /proc/self/fd, less the one the listing itself holds open.
    static func openFileDescriptors() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(dir) }
        var n = 0
        while let entry = readdir(dir) {
            if entry.pointee.d_name.0 != CChar(UInt8(ascii: ".")) { n += 1 }
        }
        return max(0, n - 1)
    }
}
