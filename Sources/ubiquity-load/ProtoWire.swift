/// Reads the few protobuf fields the fan-out measurement needs straight from the wire bytes.
///
/// The subscribers receive ~100,000 messages a second in W5; decoding each whole
/// `SubscribeResponse` (strings, timestamps, maps) would make the generator, not the server, the
/// thing measured. Only field numbers and varints are read here; anything malformed yields nil.
enum ProtoWire {
    /// One field: its number, its wire type, and its varint value or its length-delimited bytes.
    struct Field {
        var number: Int
        var wireType: Int
        var varint: UInt64
        var bytes: UnsafeRawBufferPointer
    }

    static func varint(_ buf: UnsafeRawBufferPointer, _ i: inout Int) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while i < buf.count, shift < 64 {
            let b = buf[i]
            i += 1
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    /// Calls `body` for each top-level field of a message; false when the bytes are malformed.
    @discardableResult
    static func forEachField(_ buf: UnsafeRawBufferPointer, _ body: (Field) -> Void) -> Bool {
        var i = 0
        while i < buf.count {
            guard let key = varint(buf, &i) else { return false }
            var field = Field(number: Int(key >> 3), wireType: Int(key & 7), varint: 0, bytes: UnsafeRawBufferPointer(start: nil, count: 0))
            switch field.wireType {
            case 0:
                guard let v = varint(buf, &i) else { return false }
                field.varint = v
            case 1:
                guard i + 8 <= buf.count else { return false }
                i += 8
            case 2:
                guard let n = varint(buf, &i), n <= UInt64(buf.count - i) else { return false }
                field.bytes = UnsafeRawBufferPointer(rebasing: buf[i..<(i + Int(n))])
                i += Int(n)
            case 5:
                guard i + 4 <= buf.count else { return false }
                i += 4
            default:
                return false
            }
            body(field)
        }
        return true
    }

    /// `SaveResult.generation` (field 2).
    static func saveGeneration(_ buf: UnsafeRawBufferPointer) -> Int64? {
        var generation: Int64?
        guard forEachField(buf, { f in if f.number == 2 && f.wireType == 0 { generation = Int64(bitPattern: f.varint) } }) else { return nil }
        return generation
    }

    /// What one `SubscribeResponse` carried, as far as the measurement cares.
    enum Event: Equatable {
        /// `transactions` (field 3): the generations of its `Transaction`s (field 1 of the batch,
        /// generation = field 2 of each).
        case transactions([Int64])
        /// `caught_up` (field 4).
        case caughtUp
        /// Anything else (progress markers, store events …).
        case other
    }

    static func subscribeEvent(_ buf: UnsafeRawBufferPointer) -> Event? {
        var event = Event.other
        var ok = true
        let parsed = forEachField(buf) { f in
            switch (f.number, f.wireType) {
            case (3, 2):
                var generations: [Int64] = []
                ok = ok && forEachField(f.bytes) { t in
                    guard t.number == 1, t.wireType == 2 else { return }
                    ok = ok && forEachField(t.bytes) { g in
                        if g.number == 2 && g.wireType == 0 { generations.append(Int64(bitPattern: g.varint)) }
                    }
                }
                event = .transactions(generations)
            case (4, 2):
                event = .caughtUp
            default:
                break
            }
        }
        return parsed && ok ? event : nil
    }
}
