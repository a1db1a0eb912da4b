import NIOCore
import Testing

@testable import GraphQLTransportWS

/// A server's frames as bytes (RFC 6455 §5.2), for the reader and for embedded connections.
enum ServerFrame {
    static func bytes(opcode: UInt8, fin: Bool = true, _ payload: ByteBuffer, mask: [UInt8]? = nil, rsv: UInt8 = 0) -> ByteBuffer {
        var out = ByteBuffer()
        out.writeInteger((fin ? 0x80 : 0) | rsv | opcode)
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        let count = payload.readableBytes
        if count < 126 {
            out.writeInteger(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.writeInteger(maskBit | 126)
            out.writeInteger(UInt16(count))
        } else {
            out.writeInteger(maskBit | 127)
            out.writeInteger(UInt64(count))
        }
        if let mask {
            out.writeBytes(mask)
            for (index, byte) in payload.readableBytesView.enumerated() { out.writeInteger(byte ^ mask[index % 4]) }
        } else {
            out.writeImmutableBuffer(payload)
        }
        return out
    }

    static func text(_ text: String, fin: Bool = true) -> ByteBuffer { bytes(opcode: 0x1, fin: fin, ByteBuffer(string: text)) }
    static func continuation(_ text: String, fin: Bool) -> ByteBuffer { bytes(opcode: 0x0, fin: fin, ByteBuffer(string: text)) }
}

/// The upstream connection's frame reading: whole messages out of bytes however they are cut,
/// fragments joined, control frames between them, limits, and the rules' breaches.
@Suite struct WebSocketMessageReaderTests {
    typealias Message = WebSocketMessageReader.Message

    /// Every message in `bytes`, read as one read.
    static func read(_ bytes: ByteBuffer, max: Int = 1 << 20) throws(WebSocketMessageReader.Failure) -> [Message] {
        var reader = WebSocketMessageReader(maxMessageBytes: max)
        var out: [Message] = []
        try reader.read(bytes) { out.append($0) }
        return out
    }

    /// The same bytes as reads cut at `cuts` (offsets, ascending).
    static func read(_ bytes: ByteBuffer, cutAt cuts: [Int]) throws(WebSocketMessageReader.Failure) -> [Message] {
        var reader = WebSocketMessageReader(maxMessageBytes: 1 << 20)
        var out: [Message] = []
        var from = 0
        for cut in cuts + [bytes.readableBytes] {
            try reader.read(bytes.getSlice(at: bytes.readerIndex + from, length: cut - from)!) { out.append($0) }
            from = cut
        }
        return out
    }

    @Test func textMessagesOfEveryLengthFormAreReadWhole() throws {
        let short = String(repeating: "a", count: 125)
        let medium = String(repeating: "b", count: 126)
        let long = String(repeating: "c", count: 70_000)
        var bytes = ServerFrame.text(short)
        bytes.writeImmutableBuffer(ServerFrame.text(medium))
        bytes.writeImmutableBuffer(ServerFrame.text(long))
        bytes.writeImmutableBuffer(ServerFrame.text(""))
        #expect(
            try Self.read(bytes) == [.text(ByteBuffer(string: short)), .text(ByteBuffer(string: medium)), .text(ByteBuffer(string: long)), .text(ByteBuffer())]
        )
    }

    @Test func bytesCutAnywhereGiveTheSameMessages() throws {
        var bytes = ServerFrame.text(#"{"type":"next","id":"1","payload":{"data":{}}}"#)
        bytes.writeImmutableBuffer(ServerFrame.text("x", fin: false))
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0x9, ByteBuffer(string: "p")))
        bytes.writeImmutableBuffer(ServerFrame.continuation("y", fin: true))
        bytes.writeImmutableBuffer(ServerFrame.text(String(repeating: "z", count: 300)))
        let whole = try Self.read(bytes)
        #expect(whole.count == 4)
        for cut in 0...bytes.readableBytes {
            #expect(try Self.read(bytes, cutAt: [cut]) == whole, "cut at \(cut)")
        }
        // One byte per read: every frame is put together from the front of the reads after it.
        #expect(try Self.read(bytes, cutAt: Array(1..<bytes.readableBytes)) == whole)
    }

    @Test func aLargeFrameOverManyReadsIsCopiedOnceWhole() throws {
        let text = String(repeating: "q", count: 200_000)
        let bytes = ServerFrame.text(text)
        #expect(try Self.read(bytes, cutAt: Array(stride(from: 65_536, to: bytes.readableBytes, by: 65_536))) == [.text(ByteBuffer(string: text))])
    }

    @Test func aPartialFrameIsKeptUntilItsRestComes() throws {
        var reader = WebSocketMessageReader(maxMessageBytes: 1_000)
        let frame = ServerFrame.text("hello")
        var out: [Message] = []
        try reader.read(frame.getSlice(at: 0, length: 4)!) { out.append($0) }
        #expect(out.isEmpty)
        try reader.read(frame.getSlice(at: 4, length: frame.readableBytes - 4)!) { out.append($0) }
        #expect(out == [.text(ByteBuffer(string: "hello"))])
    }

    @Test func fragmentsAreJoinedAndControlFramesBetweenThemPassAtOnce() throws {
        var bytes = ServerFrame.text("Hel", fin: false)
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0x9, ByteBuffer(string: "ping")))
        bytes.writeImmutableBuffer(ServerFrame.continuation("lo, ", fin: false))
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0xA, ByteBuffer()))
        bytes.writeImmutableBuffer(ServerFrame.continuation("world", fin: true))
        #expect(try Self.read(bytes) == [.ping(ByteBuffer(string: "ping")), .pong, .text(ByteBuffer(string: "Hello, world"))])
    }

    @Test func aMaskedFrameIsUnmaskedAndBinaryAndCloseAreTold() throws {
        var bytes = ServerFrame.bytes(opcode: 0x1, ByteBuffer(string: "masked text"), mask: [0x11, 0x22, 0x33, 0x44])
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0x2, ByteBuffer(bytes: [1, 2, 3])))
        var close = ByteBuffer()
        close.writeInteger(UInt16(4400))
        close.writeString("bad")
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0x8, close))
        #expect(try Self.read(bytes) == [.text(ByteBuffer(string: "masked text")), .binary, .close(close)])
    }

    @Test func reservedOpcodesAreSkipped() throws {
        var bytes = ServerFrame.bytes(opcode: 0x3, ByteBuffer(string: "?"))
        bytes.writeImmutableBuffer(ServerFrame.bytes(opcode: 0xB, ByteBuffer(string: "?")))
        bytes.writeImmutableBuffer(ServerFrame.text("after"))
        #expect(try Self.read(bytes) == [.text(ByteBuffer(string: "after"))])
    }

    @Test func aFrameOverTheLimitFailsAtItsHeaderBeforeItsBytesCome() throws {
        let header = ServerFrame.text(String(repeating: "a", count: 101)).getSlice(at: 0, length: 4)!
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try Self.read(header, max: 100) }
        let huge = ByteBuffer(bytes: [0x81, 127, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try Self.read(huge, max: 100) }
        // Its header cut in two reads: the second fails.
        var reader = WebSocketMessageReader(maxMessageBytes: 100)
        try reader.read(huge.getSlice(at: 0, length: 3)!) { _ in Issue.record("a message from a header") }
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try reader.read(huge.getSlice(at: 3, length: 7)!) { _ in } }
        // Masked, with its length whole but not its mask key: it fails now, as in one read.
        let masked = ByteBuffer(bytes: [0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0x10, 0])
        var second = WebSocketMessageReader(maxMessageBytes: 100)
        try second.read(masked.getSlice(at: 0, length: 4)!) { _ in Issue.record("a message from a header") }
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try second.read(masked.getSlice(at: 4, length: 6)!) { _ in } }
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try Self.read(masked, max: 100) }
        #expect(try Self.read(ServerFrame.text(String(repeating: "a", count: 100)), max: 100).count == 1)
    }

    @Test func fragmentsOverTheLimitTogetherFail() throws {
        var bytes = ServerFrame.text(String(repeating: "a", count: 60), fin: false)
        bytes.writeImmutableBuffer(ServerFrame.continuation(String(repeating: "b", count: 41), fin: true))
        #expect(throws: WebSocketMessageReader.Failure.tooLarge) { try Self.read(bytes, max: 100) }
    }

    @Test func brokenRulesFail() throws {
        let cases: [(String, ByteBuffer)] = [
            ("fragmented control frame", ServerFrame.bytes(opcode: 0x9, fin: false, ByteBuffer())),
            ("control frame longer than 125 bytes", ServerFrame.bytes(opcode: 0x8, ByteBuffer(repeating: 0x41, count: 126))),
            ("continuation frame without a message to continue", ServerFrame.continuation("x", fin: true)),
            (
                "a message began before the last one's final fragment",
                {
                    var b = ServerFrame.text("a", fin: false); b.writeImmutableBuffer(ServerFrame.text("b")); return b
                }()
            ),
        ]
        for (reason, bytes) in cases {
            #expect(throws: WebSocketMessageReader.Failure.malformed(reason)) { try Self.read(bytes) }
        }
    }
}
