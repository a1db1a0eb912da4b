/// A syntax error in a GraphQL document, with where it is: 1-based line, and 1-based column
/// counted in UTF-8 bytes from the line's start.
package struct GraphQLSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    package var message: String
    package var line: Int
    package var column: Int

    package init(message: String, line: Int, column: Int) {
        self.message = message
        self.line = line
        self.column = column
    }

    package var description: String { "Syntax Error (\(line):\(column)): \(message)" }
}

/// One lexical token: where it is in the document's UTF-8 bytes and what kind it is.
struct GraphQLToken: Equatable {
    enum Kind: Equatable {
        /// `! $ & ( ) : = @ [ ] { | }`, the byte itself.
        case punctuator(UInt8)
        /// `...`
        case spread
        case name
        case int
        case float
        case string
        case blockString
        case end
    }

    var kind: Kind
    var start: Int
    var end: Int
}

/// The lexical grammar of GraphQL (the specification's October 2021 edition): ignored tokens
/// (a byte order mark, white space, line terminators, commas, comments) are skipped, every
/// other token is checked, so a document the lexer passes has only well-formed names,
/// numbers and strings. The bytes must outlive the lexer (`withUTF8`).
struct GraphQLLexer {
    let bytes: UnsafeBufferPointer<UInt8>
    private(set) var position = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The document's text for `token`.
    func text(_ token: GraphQLToken) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), as: UTF8.self)
    }

    /// Whether `token` is the name `word` (keywords are names in GraphQL).
    func isName(_ token: GraphQLToken, _ word: StaticString) -> Bool {
        guard token.kind == .name, token.end - token.start == word.utf8CodeUnitCount else { return false }
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for k in 0..<w.count where bytes[token.start + k] != w[k] { return false }
        return true
    }

    /// An error at byte offset `offset`, with its line and column.
    func error(_ message: String, at offset: Int) -> GraphQLSyntaxError {
        var line = 1
        var lineStart = 0
        var i = 0
        while i < min(offset, bytes.count) {
            if bytes[i] == 0x0A || (bytes[i] == 0x0D && (i + 1 >= bytes.count || bytes[i + 1] != 0x0A)) {
                line += 1
                lineStart = i + 1
            }
            i += 1
        }
        return GraphQLSyntaxError(message: message, line: line, column: offset - lineStart + 1)
    }

    private func byte(_ i: Int) -> UInt8? { i < bytes.count ? bytes[i] : nil }

    /// How a byte reads in an error message: the character, or its code point if unprintable.
    private func describe(_ i: Int) -> String {
        guard let c = byte(i) else { return "<EOF>" }
        if c >= 0x20 && c < 0x7F { return "\"\(Character(Unicode.Scalar(c)))\"" }
        if c < 0x80 { return "U+" + String(c, radix: 16, uppercase: true).leftPadded(to: 4) }
        // A UTF-8 sequence: the scalar it starts.
        var end = i + 1
        while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
        return "\"" + String(decoding: UnsafeBufferPointer(rebasing: bytes[i..<end]), as: UTF8.self) + "\""
    }

    private static func isNameStart(_ c: UInt8) -> Bool { (c | 0x20 >= 0x61 && c | 0x20 <= 0x7A) || c == 0x5F }
    private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    private static func isNameContinue(_ c: UInt8) -> Bool { isNameStart(c) || isDigit(c) }
    private static func isHex(_ c: UInt8) -> Bool { isDigit(c) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66) }
    private static func hexValue(_ c: UInt8) -> UInt32 { isDigit(c) ? UInt32(c - 0x30) : UInt32((c | 0x20) - 0x61 + 10) }

    /// The next token after any ignored ones; `.end` at the end of the document.
    mutating func next() throws(GraphQLSyntaxError) -> GraphQLToken {
        skipIgnored()
        let start = position
        guard let c = byte(position) else { return GraphQLToken(kind: .end, start: start, end: start) }
        switch c {
        case 0x21, 0x24, 0x26, 0x28, 0x29, 0x3A, 0x3D, 0x40, 0x5B, 0x5D, 0x7B, 0x7C, 0x7D:
            position += 1
            return GraphQLToken(kind: .punctuator(c), start: start, end: position)
        case 0x2E:
            guard byte(position + 1) == 0x2E, byte(position + 2) == 0x2E else {
                throw error("Unexpected \".\", did you mean \"...\"?", at: start)
            }
            position += 3
            return GraphQLToken(kind: .spread, start: start, end: position)
        case 0x22:
            if byte(position + 1) == 0x22, byte(position + 2) == 0x22 { return try blockString() }
            return try string()
        case 0x2D, 0x30...0x39:
            return try number()
        default:
            if Self.isNameStart(c) {
                position += 1
                while let d = byte(position), Self.isNameContinue(d) { position += 1 }
                return GraphQLToken(kind: .name, start: start, end: position)
            }
            if c < 0x20 { throw error("Invalid character \(describe(start)).", at: start) }
            throw error("Unexpected character \(describe(start)).", at: start)
        }
    }

    private mutating func skipIgnored() {
        while let c = byte(position) {
            switch c {
            case 0x09, 0x20, 0x2C, 0x0A, 0x0D:
                position += 1
            case 0xEF where byte(position + 1) == 0xBB && byte(position + 2) == 0xBF:  // U+FEFF
                position += 3
            case 0x23:  // a comment runs to the end of the line; a control character ends it too
                position += 1
                while let d = byte(position), d >= 0x20 || d == 0x09 { position += 1 }
            default:
                return
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, not followed by `.` or a name start.
    private mutating func number() throws(GraphQLSyntaxError) -> GraphQLToken {
        let start = position
        var isFloat = false
        if byte(position) == 0x2D { position += 1 }
        if byte(position) == 0x30 {
            position += 1
            if let d = byte(position), Self.isDigit(d) {
                throw error("Invalid number, unexpected digit after 0: \(describe(position)).", at: position)
            }
        } else {
            try digits()
        }
        if byte(position) == 0x2E {
            isFloat = true
            position += 1
            try digits()
        }
        if let e = byte(position), e | 0x20 == 0x65 {
            isFloat = true
            position += 1
            if let s = byte(position), s == 0x2B || s == 0x2D { position += 1 }
            try digits()
        }
        if let d = byte(position), d == 0x2E || Self.isNameStart(d) {
            throw error("Invalid number, expected digit but got: \(describe(position)).", at: position)
        }
        return GraphQLToken(kind: isFloat ? .float : .int, start: start, end: position)
    }

    private mutating func digits() throws(GraphQLSyntaxError) {
        guard let d = byte(position), Self.isDigit(d) else {
            throw error("Invalid number, expected digit but got: \(describe(position)).", at: position)
        }
        while let d = byte(position), Self.isDigit(d) { position += 1 }
    }

    /// A quoted string: no line terminator or control character inside; escapes `\" \\ \/ \b
    /// \f \n \r \t`, `\uXXXX` (a surrogate only as a leading + trailing pair) and `\u{X…}`.
    private mutating func string() throws(GraphQLSyntaxError) -> GraphQLToken {
        let start = position
        position += 1
        while let c = byte(position) {
            switch c {
            case 0x22:
                position += 1
                return GraphQLToken(kind: .string, start: start, end: position)
            case 0x0A, 0x0D:
                throw error("Unterminated string.", at: position)
            case 0x5C:
                try escape()
            case 0x09:
                position += 1
            case ..<0x20:
                throw error("Invalid character within String: \(describe(position)).", at: position)
            default:
                position += 1
            }
        }
        throw error("Unterminated string.", at: position)
    }

    private mutating func escape() throws(GraphQLSyntaxError) {
        let start = position
        position += 1
        guard let c = byte(position) else { throw error("Unterminated string.", at: position) }
        switch c {
        case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74:
            position += 1
        case 0x75:  // u
            position += 1
            let scalar = try unicodeEscape(from: start)
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                // A leading surrogate must be followed by an escaped trailing one.
                let second = position
                guard byte(position) == 0x5C, byte(position + 1) == 0x75, byte(position + 2) != 0x7B else {
                    throw error("Invalid Unicode escape sequence: a leading surrogate without its pair.", at: start)
                }
                position += 2
                let trailing = try unicodeEscape(from: second)
                guard trailing >= 0xDC00 && trailing <= 0xDFFF else {
                    throw error("Invalid Unicode escape sequence: a leading surrogate without its pair.", at: start)
                }
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw error("Invalid Unicode escape sequence: a trailing surrogate alone.", at: start)
            }
        default:
            throw error("Invalid character escape sequence: \\\(describe(position)).", at: start)
        }
    }

    /// After `\u`: four hex digits or `{hex…}` up to U+10FFFF; the code point.
    private mutating func unicodeEscape(from start: Int) throws(GraphQLSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        if byte(position) == 0x7B {
            position += 1
            var count = 0
            while let h = byte(position), Self.isHex(h) {
                value = value &* 16 &+ Self.hexValue(h)
                count += 1
                position += 1
                if value > 0x10FFFF || count > 8 { break }
            }
            guard count > 0, value <= 0x10FFFF, byte(position) == 0x7D, !(value >= 0xD800 && value <= 0xDFFF) else {
                throw error("Invalid Unicode escape sequence.", at: start)
            }
            position += 1
            return value
        }
        for _ in 0..<4 {
            guard let h = byte(position), Self.isHex(h) else { throw error("Invalid Unicode escape sequence.", at: start) }
            value = value * 16 + Self.hexValue(h)
            position += 1
        }
        return value
    }

    /// `"""…"""`: any characters but control ones other than tab and line terminators; `\"""`
    /// stands for `"""`.
    private mutating func blockString() throws(GraphQLSyntaxError) -> GraphQLToken {
        let start = position
        position += 3
        while let c = byte(position) {
            if c == 0x22, byte(position + 1) == 0x22, byte(position + 2) == 0x22 {
                position += 3
                return GraphQLToken(kind: .blockString, start: start, end: position)
            }
            if c == 0x5C, byte(position + 1) == 0x22, byte(position + 2) == 0x22, byte(position + 3) == 0x22 {
                position += 4
                continue
            }
            if c < 0x20, c != 0x09, c != 0x0A, c != 0x0D {
                throw error("Invalid character within block string: \(describe(position)).", at: position)
            }
            position += 1
        }
        throw error("Unterminated block string.", at: position)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
