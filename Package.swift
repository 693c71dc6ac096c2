// swift-tools-version:6.1
// Ubiquity — Core Data–style object stores served over gRPC.
// One target per layer (SPEC §7); dependencies point one way:
//   UbiquityLock (the one lock type, no dependencies) → every layer that shares state across threads
//   CLibUV → UbiquityLoop → UbiquityGRPC (transport, no storage)
//   CSQLite → UbiquityStorage (storage, no gRPC)
//   UbiquityProtos (generated) ; UbiquityServices binds transport + storage ; ubiquityd runs it.
import PackageDescription

let package = Package(
    name: "Ubiquity",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "ubiquityd", targets: ["ubiquityd"]),
        .executable(name: "ubiq", targets: ["ubiq"]),
        .executable(name: "ubiquity-load", targets: ["ubiquity-load"]),
        .library(name: "UbiquityStorage", targets: ["UbiquityStorage"]),
        // For the fuzz package (fuzz/Package.swift), which depends on this one by path.
        .library(name: "UbiquityQuery", targets: ["UbiquityQuery"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // ubiquityd's config file (YAML): its node tree keeps line numbers for error messages.
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // SHA-256 (credential hashes, backup checksums, model version hashes): docs/architecture.md "Dependencies".
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"4.0.0"),
    ],
    targets: [
        // C system libraries (Debian: libuv1-dev, libnghttp2-dev, libsqlite3-dev) with shims.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Debian's libhttp-parser-dev ships no pkg-config file: the module map links it by name.
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        // OpenSSL 3 (Debian libssl-dev) for the transport's TLS, with a shim for its macros.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // SQLite VFSes in C: the writer's WAL write coalescing (storage), and fault injection
        // (test support: only test targets depend on it).
        .target(name: "CSQLiteWALBuffer", dependencies: ["CSQLite"]),
        .target(name: "CSQLiteFaultVFS", dependencies: ["CSQLite"]),
        // glibc's malloc.h (mallinfo2, malloc_trim) for ubiquityd's memory trimmer.
        .systemLibrary(name: "CMalloc"),

        // The lock every cross-thread value of the server and client sits under: Synchronization's
        // Mutex, or a pthread mutex ThreadSanitizer can see when built with -DUBIQ_TSAN
        // (scripts/sanitize). No dependencies, so every layer may use it.
        .target(name: "UbiquityLock"),
        // Event-loop layer: libuv only.
        .target(name: "UbiquityLoop", dependencies: ["CLibUV", "UbiquityLock"]),
        // HTTP/2 + gRPC transport: nghttp2, TLS, framing, routing, status, deadlines. No storage.
        .target(
            name: "UbiquityGRPC",
            dependencies: [
                "UbiquityLoop", "UbiquityLock", "CNGHTTP2", "COpenSSL",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                // Call metrics through the swift-metrics API only: the backend is the daemon's choice.
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]),
        // A small HTTP/1.1 server (GET of a few paths) on its own libuv loop: /metrics and /healthz.
        // Loop + http_parser only: it knows nothing of gRPC, storage or metrics.
        .target(name: "UbiquityHTTP", dependencies: ["UbiquityLoop", "UbiquityLock", "CHTTPParser"]),
        // The Prometheus exposition: swift-metrics' backend (swift-prometheus) with the help text of
        // every metric, and the gauges sampled at scrape time. No gRPC, no storage: the daemon
        // hands it the samplers.
        .target(
            name: "UbiquityMetrics",
            dependencies: [
                "UbiquityHTTP", "UbiquityLock",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
        // Generated protobuf Swift (scripts/gen-protos regenerates it from Protos/).
        .target(
            name: "UbiquityProtos",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        // Storage engine: SQLite only. No gRPC.
        .target(
            name: "UbiquityStorage",
            dependencies: [
                "CSQLite", "CSQLiteWALBuffer", "UbiquityLock", .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // Query layer: NSPredicate-format parser, SQL compiler, in-memory evaluator, fetch executor,
        // batch update/delete, deduplication. Storage only; no gRPC.
        .target(
            name: "UbiquityQuery",
            dependencies: ["UbiquityStorage", "UbiquityLock"]),
        // gRPC client over the same libuv + nghttp2 stack (used by `ubiq` and `ubiquity-load`). No storage.
        .target(
            name: "UbiquityGRPCClient",
            dependencies: [
                "UbiquityLoop", "UbiquityGRPC", "CNGHTTP2",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]),
        // Services: bind the transport and the storage engine.
        .target(
            name: "UbiquityServices",
            dependencies: [
                "UbiquityGRPC", "UbiquityLock", "UbiquityProtos", "UbiquityStorage", "UbiquityQuery",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]),
        // gRPC interop TestService (grpc.testing), enabled in ubiquityd only by --enable-interop-testing.
        .target(
            name: "UbiquityInterop",
            dependencies: ["UbiquityGRPC", .product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        .executableTarget(
            name: "ubiquityd",
            dependencies: [
                "UbiquityServices", "UbiquityInterop", "UbiquityGRPC", "UbiquityProtos", "UbiquityStorage", "UbiquityLock", "CMalloc",
                "UbiquityMetrics", "UbiquityHTTP",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ]),

        // The command-line client.
        .executableTarget(
            name: "ubiq",
            dependencies: [
                "UbiquityGRPCClient", "UbiquityGRPC", "UbiquityProtos", "UbiquityLock",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // The load generator (SPEC §6).
        .executableTarget(
            name: "ubiquity-load",
            dependencies: [
                "UbiquityGRPCClient", "UbiquityGRPC", "UbiquityProtos", "UbiquityLoop", "UbiquityLock",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]),

        // Test support shared by every test target: temporary directories, waiting for an event
        // (never a sleep), the server transport on a loopback port. Swift only.
        .target(
            name: "UbiquityTestSupport",
            dependencies: ["UbiquityGRPC", "UbiquityLock", .product(name: "Logging", package: "swift-log")],
            path: "Tests/UbiquityTestSupport"),
        .testTarget(
            name: "UbiquityHTTPTests",
            dependencies: ["UbiquityHTTP", "UbiquityMetrics", .product(name: "CoreMetrics", package: "swift-metrics")]),
        .testTarget(name: "UbiquityLockTests", dependencies: ["UbiquityLock", "UbiquityTestSupport"]),
        .testTarget(name: "UbiquityQueryTests", dependencies: ["UbiquityQuery", "UbiquityStorage", "UbiquityTestSupport"]),
        .testTarget(
            name: "UbiquityServicesTests",
            dependencies: [
                "UbiquityServices", "UbiquityGRPC", "UbiquityProtos", "UbiquityQuery", "UbiquityStorage", "UbiquityTestSupport",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]),
        .testTarget(
            name: "UbiquityGRPCTests",
            dependencies: [
                "UbiquityGRPC", "UbiquityLoop", "UbiquityLock", "UbiquityGRPCClient", "UbiquityProtos", "UbiquityTestSupport",
                "CNGHTTP2",
                .product(name: "Logging", package: "swift-log"),  // UnexpectedErrorTests captures what the transport logs
            ]),
        .testTarget(
            name: "UbiquityGRPCClientTests",
            dependencies: [
                "UbiquityGRPCClient", "UbiquityGRPC", "UbiquityLoop", "UbiquityLock", "UbiquityProtos", "UbiquityTestSupport",
            ]),
        .testTarget(
            name: "UbiquityStorageTests",
            dependencies: ["UbiquityStorage", "CSQLite", "CSQLiteFaultVFS", "UbiquityTestSupport", "UbiquityStorageCrashChild"]),
        // Storage engine helpers: the crash-test child process and the micro-benchmark.
        .executableTarget(name: "UbiquityStorageCrashChild", dependencies: ["UbiquityStorage"]),
        .executableTarget(name: "UbiquityStorageBench", dependencies: ["UbiquityStorage", "CSQLite"]),
        // Query-layer benchmark: predicate fetches vs the same query on raw SQLite (docs/benchmarks.md).
        .executableTarget(name: "UbiquityQueryBench", dependencies: ["UbiquityQuery", "UbiquityStorage", "CSQLite"]),
    ],
    swiftLanguageModes: [.v6]
)
