// swift-tools-version:6.1
// The Ubiquity Swift client: async/await over grpc-swift 2 (its own HTTP/2 stack, SwiftNIO).
// A package of its own, outside the server's build graph: it shares no code with the server, so
// its tests are also an interop check of the server against an independent gRPC implementation.
import PackageDescription

let package = Package(
    name: "Ubiquity",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Ubiquity", targets: ["Ubiquity"]),
        .executable(name: "ubiquity-walkthrough", targets: ["Walkthrough"]),
    ],
    dependencies: [
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
    ],
    targets: [
        // The library; Generated/ is scripts/gen-protos' output (messages and client stubs).
        .target(
            name: "Ubiquity",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]),
        // The README's walkthrough: `swift run ubiquity-walkthrough 127.0.0.1:50051`.
        .executableTarget(name: "Walkthrough", dependencies: ["Ubiquity"], path: "examples/Walkthrough"),
        // Scenario and interop tests against a real ubiquityd ($UBIQUITYD); Generated/ holds the
        // grpc.testing client of Debian grpc-proto's interop protos.
        .testTarget(
            name: "UbiquityTests",
            dependencies: [
                "Ubiquity",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]),
    ]
)
