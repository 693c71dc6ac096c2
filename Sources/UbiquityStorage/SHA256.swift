/// A small SHA-256 (FIPS 180-4) for model version hashes and backup checksums; no package dependency.
enum SHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    /// One-shot digest. Only the result is allocated: the block schedule lives on the stack and
    /// the blocks are read in place (`Credentials.sessionID` hashes the bearer token of every
    /// authenticated call; see `compress`).
    static func digest(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { State(hashing: $0).bytes }
    }

    /// Lower-case hex of the digest of `input`, with no allocation but the string's.
    static func hexDigest(_ input: UnsafeRawBufferPointer) -> String {
        let state = State(hashing: input)
        return String(unsafeUninitializedCapacity: 64) { out in
            func digit(_ v: UInt32) -> UInt8 { v < 10 ? 0x30 + UInt8(v) : 0x57 + UInt8(v) }
            func put(_ i: Int, _ v: UInt32) { for n in 0..<8 { out[i * 8 + n] = digit((v >> UInt32(28 - 4 * n)) & 0xf) } }
            put(0, state.h0); put(1, state.h1); put(2, state.h2); put(3, state.h3)
            put(4, state.h4); put(5, state.h5); put(6, state.h6); put(7, state.h7)
            return 64
        }
    }

    /// Incremental hashing, for files too large to read into memory at once (backup checksums).
    struct Hasher {
        private var state = State()
        private var pending: [UInt8] = []
        private var length: UInt64 = 0

        mutating func update(_ bytes: some Collection<UInt8>) {
            length += UInt64(bytes.count)
            pending.append(contentsOf: bytes)
            let whole = pending.count / 64 * 64
            guard whole > 0 else { return }
            pending.withUnsafeBytes { p in
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                    var at = 0
                    while at < whole { state.compress(UnsafeRawBufferPointer(rebasing: p[at..<at + 64]), schedule: w); at += 64 }
                }
            }
            pending.removeFirst(whole)
        }

        mutating func finalize() -> [UInt8] {
            var st = state
            pending.withUnsafeBytes { p in
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in st.finish(p, length: length, schedule: w) }
            }
            return st.bytes
        }
    }

    /// The eight working words between blocks.
    struct State {
        var h0: UInt32 = 0x6a09e667, h1: UInt32 = 0xbb67ae85, h2: UInt32 = 0x3c6ef372, h3: UInt32 = 0xa54ff53a
        var h4: UInt32 = 0x510e527f, h5: UInt32 = 0x9b05688c, h6: UInt32 = 0x1f83d9ab, h7: UInt32 = 0x5be0cd19

        init() {}

        /// The state after all of `input`, padding included (a one-shot digest).
        init(hashing input: UnsafeRawBufferPointer) {
            var state = State()
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                let whole = input.count / 64 * 64
                var at = 0
                while at < whole {
                    state.compress(UnsafeRawBufferPointer(rebasing: input[at..<at + 64]), schedule: w)
                    at += 64
                }
                state.finish(UnsafeRawBufferPointer(rebasing: input[whole...]), length: UInt64(input.count), schedule: w)
            }
            self = state
        }

        /// The digest, big-endian words in order (written in place: the generic `flatMap` it
        /// replaced cost more than a block's compression).
        var bytes: [UInt8] {
            [UInt8](unsafeUninitializedCapacity: 32) { out, n in
                func put(_ i: Int, _ v: UInt32) {
                    out[i * 4] = UInt8(truncatingIfNeeded: v >> 24)
                    out[i * 4 + 1] = UInt8(truncatingIfNeeded: v >> 16)
                    out[i * 4 + 2] = UInt8(truncatingIfNeeded: v >> 8)
                    out[i * 4 + 3] = UInt8(truncatingIfNeeded: v)
                }
                put(0, h0); put(1, h1); put(2, h2); put(3, h3); put(4, h4); put(5, h5); put(6, h6); put(7, h7)
                n = 32
            }
        }

        /// Pads the last partial block (`rest`, under 64 bytes) with the message length and
        /// compresses the one or two blocks that makes.
        mutating func finish(_ rest: UnsafeRawBufferPointer, length: UInt64, schedule w: UnsafeMutableBufferPointer<UInt32>) {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { tail in
                tail.initialize(repeating: 0)
                for i in 0..<rest.count { tail[i] = rest[i] }
                tail[rest.count] = 0x80
                let blocks = rest.count + 9 <= 64 ? 1 : 2
                let bits = length &* 8
                for i in 0..<8 { tail[blocks * 64 - 1 - i] = UInt8(truncatingIfNeeded: bits >> (UInt64(i) * 8)) }
                let raw = UnsafeRawBufferPointer(tail)
                for b in 0..<blocks { compress(UnsafeRawBufferPointer(rebasing: raw[b * 64..<b * 64 + 64]), schedule: w) }
            }
        }

        /// One 64-byte block into the state; `w` is the caller's 64-word scratch schedule.
        mutating func compress(_ block: UnsafeRawBufferPointer, schedule w: UnsafeMutableBufferPointer<UInt32>) {
            for i in 0..<16 { w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            for i in 16..<64 {
                let s0 = SHA256.rotr(w[i - 15], 7) ^ SHA256.rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
                let s1 = SHA256.rotr(w[i - 2], 17) ^ SHA256.rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, hh = h7
            SHA256.k.withUnsafeBufferPointer { k in
                for i in 0..<64 {
                    let s1 = SHA256.rotr(e, 6) ^ SHA256.rotr(e, 11) ^ SHA256.rotr(e, 25)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
                    let s0 = SHA256.rotr(a, 2) ^ SHA256.rotr(a, 13) ^ SHA256.rotr(a, 22)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = s0 &+ maj
                    hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
                }
            }
            h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d; h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= hh
        }
    }

    static func hexString(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] })
    }

    static func hex(_ input: [UInt8]) -> String { hexString(digest(input)) }

    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
}
