/// A first-in, first-out queue: a ring buffer, so `popFirst` is O(1) and `append` amortised
/// O(1), and a popped element is released at once (a head index into an array keeps popped
/// elements alive until the array is compacted, and compacting costs O(n)).
///
/// A value type with no lock of its own: put it under a `Lock` to share it between threads.
public struct FIFOQueue<Element> {
    private var slots: ContiguousArray<Element?> = []
    private var head = 0  // slots.count is a power of two, so positions wrap with a mask
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// Adds `element` at the back.
    public mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[(head + count) & (slots.count - 1)] = element
        count += 1
    }

    /// Removes and returns the element at the front, or nil when the queue is empty.
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head].take()
        head = (head + 1) & (slots.count - 1)
        count -= 1
        if count == 0 { head = 0 }
        return element
    }

    /// The element at the front, without removing it.
    public var first: Element? { count > 0 ? slots[head] : nil }

    /// Removes every element; keeps the storage for reuse.
    public mutating func removeAll() {
        while popFirst() != nil {}
    }

    private mutating func grow() {
        var bigger = ContiguousArray<Element?>(repeating: nil, count: Swift.max(16, slots.count * 2))
        for i in 0..<count { bigger[i] = slots[(head + i) & (slots.count - 1)].take() }
        slots = bigger
        head = 0
    }
}

extension FIFOQueue: Sendable where Element: Sendable {}
