/// A growable byte buffer with a stable base address between mutations, for handing to libuv.
///
/// It owns manually allocated memory: copies alias the same storage, so each buffer has exactly
/// one owner that calls `deallocate()` once. Clearing keeps the capacity, so a connection's buffers
/// stop allocating after warm-up.
public struct ByteBuffer {
    public private(set) var base: UnsafeMutableRawPointer?
    public private(set) var count = 0
    public private(set) var capacity = 0

    public init() {}

    public init(capacity: Int) {
        reserve(capacity)
    }

    public mutating func reserve(_ minimum: Int) {
        guard minimum > capacity else { return }
        var newCapacity = Swift.max(capacity * 2, 4096)
        while newCapacity < minimum { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if let base {
            newBase.copyMemory(from: base, byteCount: count)
            base.deallocate()
        }
        base = newBase
        capacity = newCapacity
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(count + bytes.count)
        (base! + count).copyMemory(from: src, byteCount: bytes.count)
        count += bytes.count
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Removes the first `n` bytes, moving the rest to the front.
    public mutating func removeFirst(_ n: Int) {
        precondition(n <= count)
        if n == count { count = 0; return }
        base!.copyMemory(from: base! + n, byteCount: count - n)
        count -= n
    }

    public mutating func removeAll() { count = 0 }

    /// Releases the memory; the buffer is empty and usable again afterwards.
    public mutating func deallocate() {
        base?.deallocate()
        base = nil
        count = 0
        capacity = 0
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
