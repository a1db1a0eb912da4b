#if canImport(Glibc)
import Glibc
#endif

/// The kind of a JSON value found by ``JSONScanner``.
package enum JSONValueKind: Sendable, Equatable {
    case object, array, string, number, bool, null
}

/// Why a byte sequence is not the JSON we expected.
package struct JSONScanError: Error, Equatable, Sendable, CustomStringConvertible {
    package var offset: Int
    package var reason: String
    /// The text is not valid UTF-8 (or escapes an unpaired surrogate): RFC 6455 answers this
    /// with close 1007, not 4400.
    package var isEncodingError = false
    package init(offset: Int, reason: String, isEncodingError: Bool = false) {
        self.offset = offset
        self.reason = reason
        self.isEncodingError = isEncodingError
    }
    package var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// One member of a top-level JSON object: its decoded key and where its value lies.
package struct JSONMember: Sendable, Equatable {
    package var key: String
    package var kind: JSONValueKind
    /// Byte range of the value inside the scanned bytes; the value is never copied or decoded.
    package var range: Range<Int>
}

/// A validating, non-allocating JSON scanner.
///
/// It checks the whole text against RFC 8259 and reports the top-level object's members as
/// byte ranges, so an envelope (`type`, `id`) can be read while the `payload` stays
/// undecoded and can be forwarded byte for byte.
package struct JSONScanner {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0
    private static let maxDepth = 512

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Validates `bytes` as one JSON object and returns its members in order.
    /// - Parameter bytes: the complete JSON text.
    /// - Throws: ``JSONScanError`` if the text is not a single valid JSON object.
    package static func scanObject(_ bytes: UnsafeRawBufferPointer) throws(JSONScanError) -> [JSONMember] {
        var members: [JSONMember] = []
        members.reserveCapacity(4)  // an envelope's type, id and payload: one allocation, not three
        try visitObject(bytes) { key, kind, value in
            members.append(JSONMember(key: decodeString(bytes, key), kind: kind, range: value))
        }
        return members
    }

    /// Validates `bytes` as one JSON object and hands each member to `visit` in order: the
    /// byte range of its key (quotes included, undecoded), its value's kind, and its value's
    /// byte range. Nothing is allocated: a caller that knows the keys it wants compares them
    /// with ``key(_:in:is:)``. A member is visited once it is scanned; the object may still turn
    /// out invalid after it.
    package static func visitObject(
        _ bytes: UnsafeRawBufferPointer,
        _ visit: (_ key: Range<Int>, _ kind: JSONValueKind, _ value: Range<Int>) -> Void
    ) throws(JSONScanError) {
        var scanner = JSONScanner(bytes)
        try scanner.scanMembers(visit)
    }

    private mutating func scanMembers(_ visit: (_ key: Range<Int>, _ kind: JSONValueKind, _ value: Range<Int>) -> Void) throws(JSONScanError) {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{") else { throw error("expected an object") }
        index += 1
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                let keyStart = index
                guard peek() == UInt8(ascii: "\"") else { throw error("expected a key") }
                try skipString()
                let key = keyStart..<index
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
                let valueStart = index
                let kind = try skipValue()
                visit(key, kind, valueStart..<index)
                skipWhitespace()
                if peek() == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard peek() == UInt8(ascii: "}") else { throw error("expected ',' or '}'") }
                index += 1
                break
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw error("trailing characters") }
    }

    /// Whether the string literal at `range` (quotes included, valid) is `name`: compared byte
    /// for byte when it has no escape, decoded first when it has one (`"typ\u0065"` is `type`).
    /// `name` has no backslash; an escape only makes a literal longer than what it decodes to,
    /// so only a longer literal needs decoding.
    package static func key(_ range: Range<Int>, in bytes: UnsafeRawBufferPointer, is name: StaticString) -> Bool {
        let count = range.count - 2
        let base = bytes.baseAddress! + range.lowerBound + 1
        if count == name.utf8CodeUnitCount { return memcmp(base, name.utf8Start, count) == 0 }
        guard count > name.utf8CodeUnitCount, memchr(base, 0x5C, count) != nil else { return false }
        return decodeString(bytes, range) == name.description
    }

    /// Validates `bytes` as exactly one JSON value of any kind.
    package static func validate(_ bytes: UnsafeRawBufferPointer) throws(JSONScanError) -> JSONValueKind {
        var scanner = JSONScanner(bytes)
        scanner.skipWhitespace()
        let kind = try scanner.skipValue()
        scanner.skipWhitespace()
        guard scanner.index == bytes.count else { throw scanner.error("trailing characters") }
        return kind
    }

    /// Decodes the JSON string literal at `range` (quotes included); the literal must be valid.
    package static func decodeString(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        let inner = bytes[(range.lowerBound + 1)..<(range.upperBound - 1)]
        if inner.isEmpty || memchr(bytes.baseAddress! + inner.startIndex, 0x5C, inner.count) == nil {
            return String(decoding: inner, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(inner.count)
        var i = inner.startIndex
        var pendingHigh: UInt32?
        while i < inner.endIndex {
            let byte = inner[i]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            let escaped = inner[i + 1]
            i += 2
            switch escaped {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                var scalar: UInt32 = 0
                for k in 0..<4 { scalar = scalar << 4 | UInt32(hexValue(inner[i + k])) }
                i += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    pendingHigh = scalar
                    continue
                }
                if (0xDC00..<0xE000).contains(scalar), let high = pendingHigh {
                    scalar = 0x10000 + ((high - 0xD800) << 10) + (scalar - 0xDC00)
                }
                pendingHigh = nil
                let unicode = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                out.append(contentsOf: Array(String(Character(unicode)).utf8))
            default: out.append(escaped)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return byte - UInt8(ascii: "A") + 10
        }
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private func error(_ reason: String) -> JSONScanError { JSONScanError(offset: index, reason: reason) }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func skipValue() throws(JSONScanError) -> JSONValueKind {
        guard let byte = peek() else { throw error("unexpected end") }
        switch byte {
        case UInt8(ascii: "{"):
            try skipContainer(close: UInt8(ascii: "}"), keyed: true)
            return .object
        case UInt8(ascii: "["):
            try skipContainer(close: UInt8(ascii: "]"), keyed: false)
            return .array
        case UInt8(ascii: "\""):
            try skipString()
            return .string
        case UInt8(ascii: "t"):
            try skipLiteral("true")
            return .bool
        case UInt8(ascii: "f"):
            try skipLiteral("false")
            return .bool
        case UInt8(ascii: "n"):
            try skipLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try skipNumber()
            return .number
        default:
            throw error("unexpected character")
        }
    }

    private mutating func skipContainer(close: UInt8, keyed: Bool) throws(JSONScanError) {
        depth += 1
        guard depth <= Self.maxDepth else { throw error("nested too deeply") }
        index += 1
        skipWhitespace()
        if peek() == close {
            index += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            if keyed {
                guard peek() == UInt8(ascii: "\"") else { throw error("expected a key") }
                try skipString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
            }
            _ = try skipValue()
            skipWhitespace()
            if peek() == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard peek() == close else { throw error("expected ',' or closing bracket") }
            index += 1
            depth -= 1
            return
        }
    }

    /// Skips a string literal, checking that it is valid UTF-8 (RFC 3629: no overlongs, no
    /// encoded surrogates, nothing above U+10FFFF) and that every `\\u` escape of a surrogate
    /// is part of a high-low pair, so nothing that is not Unicode text gets through.
    private mutating func skipString() throws(JSONScanError) {
        index += 1
        while index < bytes.count {
            // Plain bytes (ASCII from space up, no quote, no backslash): most of a result's
            // text. The byte that ends them is looked at alone below.
            index = Self.skipPlain(bytes, from: index)
            guard index < bytes.count else { break }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = peek() else { throw error("unterminated string") }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    let unit = try hexEscape(at: index + 1)
                    index += 5
                    if (0xDC00..<0xE000).contains(unit) { throw encodingError("unpaired low surrogate escape") }
                    if (0xD800..<0xDC00).contains(unit) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u"),
                            (0xDC00..<0xE000).contains(try hexEscape(at: index + 2))
                        else { throw encodingError("unpaired high surrogate escape") }
                        index += 6
                    }
                default:
                    throw error("bad escape")
                }
            case 0x00..<0x20:
                throw error("control character in string")
            case 0x20..<0x80:
                index += 1
            default:
                try skipUTF8Sequence(lead: byte)
            }
        }
        throw error("unterminated string")
    }

    /// Whether none of the eight bytes in `word` ends a run of plain string bytes: a byte of
    /// 0x80 and up (UTF-8 to validate), under 0x20 (a control character), `"` or `\`.
    @inline(__always)
    package static func allPlain(_ word: UInt64) -> Bool { specialBits(word) == 0 }

    /// The same test for four words at once: their bits are combined before the one branch.
    @inline(__always)
    static func allPlain(_ a: UInt64, _ b: UInt64, _ c: UInt64, _ d: UInt64) -> Bool {
        specialBits(a) | specialBits(b) | specialBits(c) | specialBits(d) == 0
    }

    /// A word with the top bit set in each byte that may end a run of plain bytes. SWAR:
    /// `(x - 0x01…) & ~x & 0x80…` has a byte's top bit set where that byte of `x` is zero (the
    /// lowest such byte always; a higher one maybe falsely, which only sends it the slow way).
    @inline(__always)
    static func specialBits(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & high }
        let quote = hasZero(word ^ (ones &* 0x22))
        let backslash = hasZero(word ^ (ones &* 0x5C))
        let control = (word &- ones &* 0x20) & ~word & high
        return (word & high) | quote | backslash | control
    }

    /// The first index from `start` on that is not a plain string byte (or the end): one byte
    /// at a time for the first 16 (a key or a short value ends there), then 32 and 8 at a
    /// time, then one at a time up to the byte that ended the run.
    @inline(__always)
    private static func skipPlain(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        guard let base = bytes.baseAddress else { return start }
        let count = bytes.count
        var at = start
        let short = Swift.min(count, start + 16)
        while at < short {
            guard isPlain(base.load(fromByteOffset: at, as: UInt8.self)) else { return at }
            at += 1
        }
        while at + 32 <= count,
            allPlain(
                base.loadUnaligned(fromByteOffset: at, as: UInt64.self),
                base.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self),
                base.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self),
                base.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self)
            )
        {
            at += 32
        }
        while at + 8 <= count, allPlain(base.loadUnaligned(fromByteOffset: at, as: UInt64.self)) {
            at += 8
        }
        while at < count, isPlain(base.load(fromByteOffset: at, as: UInt8.self)) {
            at += 1
        }
        return at
    }

    @inline(__always)
    private static func isPlain(_ byte: UInt8) -> Bool { byte >= 0x20 && byte < 0x80 && byte != 0x22 && byte != 0x5C }

    /// The 16-bit value of the four hex digits at `at`.
    private func hexEscape(at start: Int) throws(JSONScanError) -> UInt32 {
        guard start + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for k in 0..<4 {
            let digit = bytes[start + k]
            guard digit.isHexDigit else { throw error("bad \\u escape") }
            value = value << 4 | UInt32(Self.hexValue(digit))
        }
        return value
    }

    /// Validates one multi-byte UTF-8 sequence starting at `index` (Unicode Table 3-7).
    private mutating func skipUTF8Sequence(lead: UInt8) throws(JSONScanError) {
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: throw encodingError("invalid UTF-8 byte 0x\(String(lead, radix: 16))")
        }
        guard index + length <= bytes.count else { throw encodingError("truncated UTF-8 sequence") }
        guard secondRange.contains(bytes[index + 1]) else { throw encodingError("invalid UTF-8 sequence") }
        for k in 2..<length where !(0x80...0xBF).contains(bytes[index + k]) {
            throw encodingError("invalid UTF-8 sequence")
        }
        index += length
    }

    private func encodingError(_ reason: String) -> JSONScanError {
        JSONScanError(offset: index, reason: reason, isEncodingError: true)
    }

    private mutating func skipLiteral(_ literal: StaticString) throws(JSONScanError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("bad literal") }
        let p = literal.utf8Start
        for k in 0..<count where bytes[index + k] != p[k] { throw error("bad literal") }
        index += count
    }

    private mutating func skipNumber() throws(JSONScanError) {
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek(), first.isDigit else { throw error("bad number") }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard peek()?.isDigit == true else { throw error("bad fraction") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard peek()?.isDigit == true else { throw error("bad exponent") }
            skipDigits()
        }
    }

    private mutating func skipDigits() {
        while let byte = peek(), byte.isDigit { index += 1 }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}

extension JSONScanner {
    /// The byte range of the first element of `bytes`, which must be a JSON array; nil when it
    /// is empty or not a valid array.
    package static func firstElement(ofArray bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        var scanner = JSONScanner(bytes)
        scanner.skipWhitespace()
        guard scanner.peek() == UInt8(ascii: "[") else { return nil }
        scanner.index += 1
        scanner.skipWhitespace()
        let start = scanner.index
        guard scanner.peek() != UInt8(ascii: "]"), (try? scanner.skipValue()) != nil else { return nil }
        return start..<scanner.index
    }
}
