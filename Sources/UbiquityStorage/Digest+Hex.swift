import Crypto

// SHA-256 comes from swift-crypto (`Crypto.SHA256`: BoringSSL on Linux, which uses the CPU's SHA
// extensions) rather than an in-house implementation; docs/architecture.md "Dependencies".

extension Digest {
    /// Lower-case hex of the digest, written straight into the string's storage: the per-call
    /// session lookup makes one (callgrind, W1: 2,227 instructions per call through an array of
    /// digits and `String(decoding:)`, docs/benchmarks.md "What authentication costs").
    var hex: String { withUnsafeBytes { lowerHex($0) } }

    /// The digest's bytes, for the hashes stored as BLOBs (API keys) and compared with
    /// `Credentials.constantTimeEqual`.
    var bytes: [UInt8] { Array(self) }
}

/// Lower-case hex of `bytes`.
func lowerHex(_ bytes: UnsafeRawBufferPointer) -> String {
    String(unsafeUninitializedCapacity: bytes.count * 2) { out in
        func digit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x57 + v }
        for (i, b) in bytes.enumerated() {
            out[2 * i] = digit(b >> 4)
            out[2 * i + 1] = digit(b & 0xf)
        }
        return bytes.count * 2
    }
}
