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
}
