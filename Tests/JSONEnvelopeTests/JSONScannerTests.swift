import NIOCore
import Testing

@testable import JSONEnvelope

/// The validating scanner and the string writer every wire shares, on their own.
@Suite struct JSONScannerTests {
    @Test func writesJSONStringsThatDecodeBackToTheSameText() throws {
        let original = "q\"b\\s\n\r\t\u{01}\u{1F}é😀/"
        var buffer = ByteBuffer()
        buffer.writeJSONString(original)
        #expect(String(buffer: buffer) == #""q\"b\\s\n\r\t\u0001\u001fé😀/""#)
        let object = ByteBuffer(string: "{\"k\":" + String(buffer: buffer) + "}")
        let decoded = try object.withUnsafeReadableBytes { bytes in
            let members = try JSONScanner.scanObject(bytes)
            return JSONScanner.decodeString(bytes, members[0].range)
        }
        #expect(decoded == original)
    }

    @Test func decodesEscapedStringsIncludingSurrogatePairs() throws {
        let text = #"{"k\n":"\ud83d\ude00 \u00e9\t\"q\""}"#
        let members = try Array(text.utf8).withUnsafeBytes { bytes in
            let members = try JSONScanner.scanObject(bytes)
            return members.map { ($0.key, JSONScanner.decodeString(bytes, $0.range)) }
        }
        #expect(members.count == 1)
        #expect(members[0].0 == "k\n")
        #expect(members[0].1 == "😀 é\t\"q\"")
    }

    /// The eight-bytes-at-a-time test agrees with the byte-by-byte rule: every byte value at
    /// every position of a plain word, and random words.
    @Test func wordAtATimeStringScanAgreesWithTheByteRule() {
        func plain(_ byte: UInt8) -> Bool { byte >= 0x20 && byte < 0x80 && byte != 0x22 && byte != 0x5C }
        func word(_ bytes: [UInt8]) -> UInt64 { bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } }
        for position in 0..<8 {
            for value in 0...255 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
                bytes[position] = UInt8(value)
                #expect(JSONScanner.allPlain(word(bytes)) == plain(UInt8(value)), "byte \(value) at \(position)")
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100_000 {
            // Bytes near the boundaries, so both outcomes are common.
            let near: [UInt8] = [0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xFF, 0x61]
            let bytes = (0..<8).map { _ in near[Int.random(in: 0..<near.count, using: &generator)] }
            #expect(JSONScanner.allPlain(word(bytes)) == bytes.allSatisfy(plain), "\(bytes)")
        }
    }

    /// A control character, a quote, an escape or a UTF-8 sequence is found at every offset of a
    /// long string, whichever eight-byte word it falls in.
    @Test func longStringsAreCheckedAtEveryOffset() throws {
        // 100 bytes: the first 16 are read one at a time, then 32 and 8 at a time, at every
        // position of a word and of a 32-byte block.
        for offset in 0..<100 {
            let head = String(repeating: "x", count: offset)
            let tail = String(repeating: "y", count: 100 - offset)
            let control = Array(#"{"s":""#.utf8) + Array(head.utf8) + [0x01] + Array(tail.utf8) + Array(#""}"#.utf8)
            #expect(throws: JSONScanError.self) { try control.withUnsafeBytes { try JSONScanner.validate($0) } }
            let badUTF8 = Array(#"{"s":""#.utf8) + Array(head.utf8) + [0xC3] + Array(tail.utf8) + Array(#""}"#.utf8)
            #expect(throws: JSONScanError.self) { try badUTF8.withUnsafeBytes { try JSONScanner.validate($0) } }
            let text = head + #"\"é\n"# + tail
            let bytes = Array(#"{"s":""#.utf8) + Array(text.utf8) + Array(#"","t":1}"#.utf8)
            let decoded = try bytes.withUnsafeBytes { bytes in
                let members = try JSONScanner.scanObject(bytes)
                return (members.count, JSONScanner.decodeString(bytes, members[0].range))
            }
            #expect(decoded.0 == 2)
            #expect(decoded.1 == head + "\"é\n" + tail)
        }
    }

    @Test func rejectsDeeplyNestedJSON() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONScanError.self) {
            try Array(deep.utf8).withUnsafeBytes { try JSONScanner.validate($0) }
        }
    }
}
