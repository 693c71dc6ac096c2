// swift-tools-version:6.1
// Coverage-guided fuzzing of Ubiquity's query layer with libFuzzer (issue 15). A package of its
// own, like swift-protobuf's FuzzTesting, so the main build never sees the fuzzer flags; build
// and run it with `scripts/fuzz` (it passes -sanitize=fuzzer,address -parse-as-library).
import PackageDescription

let package = Package(
    name: "UbiquityFuzz",
    dependencies: [.package(name: "Ubiquity", path: "..")],
    targets: [
        .executableTarget(
            name: "FuzzPredicate",
            dependencies: [
                .product(name: "UbiquityQuery", package: "Ubiquity"),
                .product(name: "UbiquityStorage", package: "Ubiquity"),
            ]),
    ]
)
