/// The `grpc-timeout` header: 1–8 ASCII digits followed by a unit
/// (H hours, M minutes, S seconds, m milliseconds, u microseconds, n nanoseconds).
public enum GRPCTimeout {
    /// Nanoseconds, or nil when the value is malformed. Saturates instead of overflowing.
    public static func parse(_ value: String) -> Int64? {
        let bytes = Array(value.utf8)
        guard bytes.count >= 2, bytes.count <= 9 else { return nil }
        var amount: Int64 = 0
        for b in bytes.dropLast() {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            amount = amount * 10 + Int64(b - UInt8(ascii: "0"))
        }
        let unit: Int64
        switch bytes.last! {
        case UInt8(ascii: "H"): unit = 3_600_000_000_000
        case UInt8(ascii: "M"): unit = 60_000_000_000
        case UInt8(ascii: "S"): unit = 1_000_000_000
        case UInt8(ascii: "m"): unit = 1_000_000
        case UInt8(ascii: "u"): unit = 1_000
        case UInt8(ascii: "n"): unit = 1
        default: return nil
        }
        let (product, overflow) = amount.multipliedReportingOverflow(by: unit)
        return overflow ? Int64.max : product
    }
}
