import LocalEndpoint
import NIOCore
import Testing

@testable import ResultDelivery

/// The hot path's in-place frame header is the one the endpoint appends everywhere else, for
/// every header length (2, 4 and 10 bytes) and at each boundary between them.
@Suite struct FrameHeaderTests {
    @Test(arguments: [0, 1, 125, 126, 127, 65_535, 65_536, 1 << 32])
    func inPlaceHeaderIsTheEndpointsHeader(length: Int) {
        var expected = ByteBuffer()
        NextFraming.writeWebSocketHeader(length: length, to: &expected)
        var room = [UInt8](repeating: 0xEE, count: NextFraming.maxHeaderBytes + 4)
        let written = room.withUnsafeMutableBytes { FrameHeader.write(length: length, to: $0.baseAddress!) }
        #expect(written == expected.readableBytes)
        #expect(Array(room.prefix(written)) == Array(expected.readableBytesView))
        #expect(room[written...].allSatisfy { $0 == 0xEE }, "nothing written past the header")
        #expect(written <= NextFraming.maxHeaderBytes)
    }

    /// RFC 6455 5.2's bytes, written out: FIN and text, then 7, 7+16 or 7+64 bits of length,
    /// big-endian.
    @Test func headersAreTheRFCsBytes() {
        let expected: [(Int, [UInt8])] = [
            (5, [0x81, 0x05]),
            (125, [0x81, 0x7D]),
            (126, [0x81, 0x7E, 0x00, 0x7E]),
            (65_535, [0x81, 0x7E, 0xFF, 0xFF]),
            (65_536, [0x81, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]),
        ]
        for (length, bytes) in expected {
            var room = [UInt8](repeating: 0, count: NextFraming.maxHeaderBytes)
            let written = room.withUnsafeMutableBytes { FrameHeader.write(length: length, to: $0.baseAddress!) }
            #expect(Array(room.prefix(written)) == bytes, "length \(length)")
        }
    }
}
