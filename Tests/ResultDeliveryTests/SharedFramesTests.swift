import GQLMuxVocabulary
import LocalEndpoint
import NIOCore
import Testing

@testable import ResultDelivery

/// A run framed once for every subscriber of a framing: the bytes each subscriber is handed
/// are exactly what framing its results alone would give, with its own prefix in every result;
/// what was handed to one never changes when the next one's prefix is written in.
@Suite struct SharedFramesTests {
    static let framings: [NextFraming] = [.line, .webSocket(.transportWS), .webSocket(.legacyWS), .sse, .multipart]

    /// Payloads of a run: small ones and ones past a WebSocket frame's one-byte length, enough
    /// of them to fill several frames.
    static let payloads: [String] = (0..<1_200).map { index in
        #"{"data":{"tick":\#(index),"pad":""# + String(repeating: "x", count: index % 7 == 0 ? 300 : index % 50) + #""}}"#
    }

    /// What one result is on the wire in `framing`, built here by hand.
    static func expected(_ framing: NextFraming, prefix: String, payload: String) -> [UInt8] {
        let message = Array((prefix + payload).utf8) + Array("\(framing.suffix)".utf8)
        guard framing.hasHeader else { return message }
        let header: [UInt8] =
            message.count < 126 ? [0x81, UInt8(message.count)] : [0x81, 126, UInt8(message.count >> 8), UInt8(message.count & 0xFF)]
        return header + message
    }

    /// The bytes a subscriber reads from `frames`: an HTTP stream's chunks unwrapped (each
    /// checked to be one whole chunk with its size line).
    static func read(_ frames: [ByteBuffer], chunked: Bool) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for frame in frames {
            var frame = frame
            guard chunked else {
                bytes += frame.readBytes(length: frame.readableBytes)!
                continue
            }
            let all = frame.readBytes(length: frame.readableBytes)!
            let end = try #require(all.firstIndex(of: UInt8(ascii: "\r")))
            let size = try #require(Int(String(decoding: all[..<end], as: UTF8.self), radix: 16))
            #expect(all.count == end + 2 + size + 2, "one whole chunk")
            #expect(Array(all.suffix(2)) == Array("\r\n".utf8))
            bytes += all[(end + 2)..<(end + 2 + size)]
        }
        return bytes
    }

    static func frames(_ framing: NextFraming, id: String, stock: inout [ByteBuffer]) -> SharedFrames {
        var spares: [SharedFrames.Spare] = []
        return frames(framing, id: id, stock: &stock, spares: &spares)
    }

    static func frames(_ framing: NextFraming, id: String, stock: inout [ByteBuffer], spares: inout [SharedFrames.Spare]) -> SharedFrames {
        let prefix = framing.prefix(id: id)
        let scratch = ByteBuffer(string: payloads.joined())
        return scratch.withUnsafeReadableBytes { all in
            var start = 0
            let bodies = payloads.map { payload in
                defer { start += payload.utf8.count }
                return UnsafeRawBufferPointer(rebasing: all[start..<(start + payload.utf8.count)])
            }
            return bodies.withUnsafeBufferPointer { bodies in
                prefix.withUnsafeReadableBytes { SharedFrames(framing: framing, prefix: $0, bodies: bodies, stock: &stock, spares: &spares) }
            }
        }
    }

    static func hold(_ frames: inout SharedFrames, _ framing: NextFraming, id: String) {
        framing.prefix(id: id).withUnsafeReadableBytes { frames.hold($0) }
    }

    static func wire(_ framing: NextFraming, id: String) -> [UInt8] {
        let prefix = String(buffer: framing.prefix(id: id))
        return payloads.flatMap { expected(framing, prefix: prefix, payload: $0) }
    }

    @Test(arguments: framings)
    func everySubscriberReadsItsOwnResultsFramedAsItsKind(_ framing: NextFraming) throws {
        var stock: [ByteBuffer] = []
        var frames = Self.frames(framing, id: "s1", stock: &stock)
        #expect(frames.frames.count > 2, "the run spans several frames")
        #expect(frames.frames.allSatisfy { $0.readableBytes <= ResultWriter.batchChunkBytes + 20 })
        #expect(try Self.read(frames.frames, chunked: framing.isChunked) == Self.wire(framing, id: "s1"))
        for id in ["s2", "t7", "s1"] {
            Self.hold(&frames, framing, id: id)
            #expect(try Self.read(frames.frames, chunked: framing.isChunked) == Self.wire(framing, id: id), "\(id)")
        }
    }

    /// What NIO still holds for a client whose socket was full keeps its bytes: the frames are
    /// copied before the next prefix is written, and only then.
    @Test(arguments: [NextFraming.line, .webSocket(.transportWS)])
    func framesStillHeldForOneSubscriberAreCopiedBeforeTheNextPrefix(_ framing: NextFraming) throws {
        var stock: [ByteBuffer] = []
        var frames = Self.frames(framing, id: "a1", stock: &stock)
        let heldForA1 = frames.frames  // as NIO holds them for a client that has not read
        Self.hold(&frames, framing, id: "a1")
        #expect(Self.address(frames.frames[0]) == Self.address(heldForA1[0]), "the same prefix writes nothing, copies nothing")
        Self.hold(&frames, framing, id: "b2")
        #expect(try Self.read(heldForA1, chunked: false) == Self.wire(framing, id: "a1"), "what a1 was handed is unchanged")
        #expect(try Self.read(frames.frames, chunked: false) == Self.wire(framing, id: "b2"))
        #expect(Self.address(frames.frames[0]) != Self.address(heldForA1[0]), "b2 got a copy")
    }

    @Test func aRunsFramesReuseTheMemoryOfThoseNothingHoldsAnyMore() {
        var stock: [ByteBuffer] = []
        var spares: [SharedFrames.Spare] = []
        var first = Self.frames(.line, id: "x", stock: &stock, spares: &spares)
        let addresses = Set(first.frames.map(Self.address))
        first.recycle(into: &stock, limit: 16, spares: &spares)
        #expect(first.frames.isEmpty)
        #expect(stock.count == addresses.count)
        #expect(spares.count == 1, "its arrays kept for the next run's")
        var second = Self.frames(.line, id: "y", stock: &stock, spares: &spares)
        #expect(stock.isEmpty)
        #expect(spares.isEmpty, "the next run's frames are described in them")
        #expect(Set(second.frames.map(Self.address)) == addresses, "every frame in memory already faulted in")
        var limited: [ByteBuffer] = []
        second.recycle(into: &limited, limit: 2, spares: &spares)
        #expect(limited.count == 2)
        #expect(spares.count == 1)
    }

    /// A client's id may be as long as a line: frames made for a huge prefix are not kept for
    /// the next run (they would stay allocated outside the memory budget).
    @Test func framesOfAHugePrefixAreNotKept() {
        var stock: [ByteBuffer] = []
        var frames = Self.frames(.line, id: String(repeating: "i", count: 100_000), stock: &stock)
        #expect(frames.frames.allSatisfy { $0.capacity > SharedFrames.keptCapacity })
        var spares: [SharedFrames.Spare] = []
        frames.recycle(into: &stock, limit: 16, spares: &spares)
        #expect(stock.isEmpty)
        #expect(frames.frames.isEmpty)
    }

    @Test func aSubscriberFitsTheFramesOfItsFramingAndPrefixLengthOnly() {
        var stock: [ByteBuffer] = []
        let frames = Self.frames(.webSocket(.transportWS), id: "ab", stock: &stock)
        let length = NextFraming.webSocket(.transportWS).prefix(id: "cd").readableBytes
        #expect(frames.fits(.webSocket(.transportWS), prefixLength: length))
        #expect(!frames.fits(.webSocket(.transportWS), prefixLength: length + 1))
        #expect(!frames.fits(.line, prefixLength: length), "a line is not a WebSocket message")
        #expect(!frames.fits(.webSocket(.legacyWS), prefixLength: length))
    }

    static func address(_ buffer: ByteBuffer) -> UInt {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
    }
}
