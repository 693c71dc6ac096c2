import Foundation
import SwiftProtobuf

/// One attribute value, as the store's model types it (SPEC §2). Literals pick the wide kinds
/// (`42` is `.int64`, `2.5` is `.double`); the server converts a value to the attribute's declared
/// type when it fits and refuses it with `VALIDATION_FAILED` when it does not.
public enum Value: Sendable, Hashable {
    case null
    case string(String)
    case bool(Bool)
    case int16(Int16)
    case int32(Int32)
    case int64(Int64)
    case float(Float)
    case double(Double)
    /// A decimal as its exact text (`"12.50"`), so no digit is lost to binary floating point.
    case decimal(String)
    case date(Date)
    case binary(Data)
    case uuid(UUID)
    case uri(URL)

    /// Any integer kind, widened.
    public var int: Int64? {
        switch self {
        case .int16(let v): return Int64(v)
        case .int32(let v): return Int64(v)
        case .int64(let v): return v
        default: return nil
        }
    }

    /// Any floating-point kind, widened.
    public var double: Double? {
        switch self {
        case .float(let v): return Double(v)
        case .double(let v): return v
        default: return nil
        }
    }

    /// The text of a `.string`.
    public var string: String? {
        if case .string(let v) = self { return v }
        return nil
    }

    /// The value of a `.bool`.
    public var bool: Bool? {
        if case .bool(let v) = self { return v }
        return nil
    }

    /// True for `.null` (an attribute without a value).
    public var isNull: Bool { self == .null }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension Value {
    init(proto: Ubiquity_V1_Value) {
        switch proto.kind {
        case .none, .nullValue: self = .null
        case .stringValue(let v): self = .string(v)
        case .boolValue(let v): self = .bool(v)
        case .int16Value(let v): self = .int16(Int16(truncatingIfNeeded: v))
        case .int32Value(let v): self = .int32(v)
        case .int64Value(let v): self = .int64(v)
        case .floatValue(let v): self = .float(v)
        case .doubleValue(let v): self = .double(v)
        case .decimalValue(let v): self = .decimal(v)
        case .dateValue(let v): self = .date(v.date)
        case .binaryValue(let v): self = .binary(v)
        // The server checks both forms; an unparsable one would be a server bug, kept as text.
        case .uuidValue(let v): self = UUID(uuidString: v).map(Value.uuid) ?? .string(v)
        case .uriValue(let v): self = URL(string: v).map(Value.uri) ?? .string(v)
        }
    }

    var proto: Ubiquity_V1_Value {
        var p = Ubiquity_V1_Value()
        switch self {
        case .null: p.nullValue = .nullValue
        case .string(let v): p.stringValue = v
        case .bool(let v): p.boolValue = v
        case .int16(let v): p.int16Value = Int32(v)
        case .int32(let v): p.int32Value = v
        case .int64(let v): p.int64Value = v
        case .float(let v): p.floatValue = v
        case .double(let v): p.doubleValue = v
        case .decimal(let v): p.decimalValue = v
        case .date(let v): p.dateValue = Google_Protobuf_Timestamp(date: v)
        case .binary(let v): p.binaryValue = v
        // Lowercase: the canonical text form, the one the server stores and returns.
        case .uuid(let v): p.uuidValue = v.uuidString.lowercased()
        case .uri(let v): p.uriValue = v.absoluteString
        }
        return p
    }
}

/// A value bound to a `$variable` of a predicate: one value, or a list for `IN`.
public enum Argument: Sendable, Hashable {
    case value(Value)
    case list([Value])

    var proto: Ubiquity_V1_Argument {
        var p = Ubiquity_V1_Argument()
        switch self {
        case .value(let v): p.value = v.proto
        case .list(let vs): p.list = .with { $0.values = vs.map(\.proto) }
        }
        return p
    }
}

extension Argument: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral
{
    public init(stringLiteral value: String) { self = .value(.string(value)) }
    public init(integerLiteral value: Int64) { self = .value(.int64(value)) }
    public init(floatLiteral value: Double) { self = .value(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .value(.bool(value)) }
    public init(arrayLiteral elements: Value...) { self = .list(elements) }
}

func protoValues(_ values: [String: Value]) -> [String: Ubiquity_V1_Value] {
    values.mapValues(\.proto)
}

func swiftValues(_ values: [String: Ubiquity_V1_Value]) -> [String: Value] {
    values.mapValues(Value.init(proto:))
}

extension Date {
    /// A time the server sends as microseconds since the Unix epoch (`*_micros` fields).
    init(unixMicros: Int64) {
        self.init(timeIntervalSince1970: Double(unixMicros) / 1e6)
    }
}
