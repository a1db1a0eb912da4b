/// A JSON value as a tree, for the few places that read or build small JSON documents whole
/// (dedup keys, the CLI's output, error payloads). Numbers keep their text, so nothing is lost
/// or rounded on the way through; objects keep their members' order (and duplicates).
package indirect enum JSONValue: Sendable, Equatable {
    case object([Member])
    case array([JSONValue])
    case string(String)
    /// A number's text as written (`2.50` stays `2.50`).
    case number(String)
    case bool(Bool)
    case null

    package struct Member: Sendable, Equatable {
        package var key: String
        package var value: JSONValue
        package init(_ key: String, _ value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// An object from a dictionary, its keys sorted.
    package static func object(_ members: [String: JSONValue]) -> JSONValue {
        .object(members.sorted { $0.key < $1.key }.map { Member($0.key, $0.value) })
    }

    /// A number from an integer.
    package static func number(_ value: Int) -> JSONValue { .number(String(value)) }

    /// A number from a `Double`: integral values without a fraction, others as Swift prints
    /// them (the shortest text that reads back the same); NaN and infinities, which JSON cannot
    /// hold, as `null`.
    package static func number(_ value: Double) -> JSONValue {
        guard value.isFinite else { return .null }
        if value == value.rounded(), value.magnitude < 1e15 { return .number(String(Int64(value))) }
        return .number(String(value))
    }

    /// The value of JSON text.
    /// - Throws: ``JSONScanError`` if `bytes` is not exactly one valid JSON value.
    package static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONScanError) -> JSONValue {
        _ = try JSONScanner.validate(bytes)
        var reader = Reader(bytes: bytes)
        return reader.value()
    }

    /// The value of JSON text, nil if it is not valid JSON.
    package static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { bytes in try? parse(UnsafeRawBufferPointer(bytes)) }
    }

    /// The member `key` of an object (the last, if it appears twice).
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.key == key }?.value
    }

    package var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    package var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// The same value with every object's members sorted by key (members with the same key
    /// keep their order): one text for objects that differ only in member order.
    package var sortingKeys: JSONValue {
        switch self {
        case .object(let members):
            let sorted = members.enumerated().sorted { ($0.element.key, $0.offset) < ($1.element.key, $1.offset) }
            return .object(sorted.map { Member($0.element.key, $0.element.value.sortingKeys) })
        case .array(let values): return .array(values.map(\.sortingKeys))
        default: return self
        }
    }

    /// Compact JSON text (no white space; strings with the fewest escapes, `/` unescaped).
    package var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .object(let members):
            out += "{"
            for (n, member) in members.enumerated() {
                if n > 0 { out += "," }
                out += jsonString(member.key)
                out += ":"
                member.value.write(to: &out)
            }
            out += "}"
        case .array(let values):
            out += "["
            for (n, value) in values.enumerated() {
                if n > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .string(let s): out += jsonString(s)
        case .number(let n): out += n
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        }
    }

    /// Walks text the scanner has validated (so it never meets a malformed byte); recursion is
    /// bounded by the scanner's depth limit.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
                index += 1
            }
        }

        mutating func value() -> JSONValue {
            skipWhitespace()
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [Member] = []
                skipWhitespace()
                while bytes[index] != UInt8(ascii: "}") {
                    skipWhitespace()
                    let key = string()
                    skipWhitespace()
                    index += 1  // :
                    members.append(Member(key, value()))
                    skipWhitespace()
                    if bytes[index] == UInt8(ascii: ",") { index += 1 }
                }
                index += 1
                return .object(members)
            case UInt8(ascii: "["):
                index += 1
                var values: [JSONValue] = []
                skipWhitespace()
                while bytes[index] != UInt8(ascii: "]") {
                    values.append(value())
                    skipWhitespace()
                    if bytes[index] == UInt8(ascii: ",") { index += 1 }
                }
                index += 1
                return .array(values)
            case UInt8(ascii: "\""):
                return .string(string())
            case UInt8(ascii: "t"):
                index += 4
                return .bool(true)
            case UInt8(ascii: "f"):
                index += 5
                return .bool(false)
            case UInt8(ascii: "n"):
                index += 4
                return .null
            default:
                let start = index
                while index < bytes.count, !",]} \t\r\n".utf8.contains(bytes[index]) { index += 1 }
                return .number(String(decoding: bytes[start..<index], as: UTF8.self))
            }
        }

        /// The decoded string literal at `index`.
        mutating func string() -> String {
            let start = index
            index += 1
            while bytes[index] != UInt8(ascii: "\"") { index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1 }
            index += 1
            return JSONScanner.decodeString(bytes, start..<index)
        }
    }
}
