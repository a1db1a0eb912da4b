/// The WebSocket frame header each result's message starts with for a WebSocket client,
/// written in place inside the batch being filled: an unmasked, final text frame's (RFC 6455
/// 5.2), 2, 4 or 10 bytes (`NextFraming.maxHeaderBytes` at most). The same bytes as
/// `NextFraming.writeWebSocketHeader(opcode:length:to:)` appends to a buffer (tested).
enum FrameHeader {
    /// Writes the header of a text message of `length` bytes at `out`, which has room for 10
    /// bytes; returns the bytes written.
    @inline(__always)
    static func write(length: Int, to out: UnsafeMutableRawPointer) -> Int {
        out.storeBytes(of: 0x81, as: UInt8.self)  // FIN, text
        if length < 126 {
            out.storeBytes(of: UInt8(length), toByteOffset: 1, as: UInt8.self)
            return 2
        }
        if length <= Int(UInt16.max) {
            out.storeBytes(of: 126, toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt16(length).bigEndian, toByteOffset: 2, as: UInt16.self)
            return 4
        }
        out.storeBytes(of: 127, toByteOffset: 1, as: UInt8.self)
        out.storeBytes(of: UInt64(length).bigEndian, toByteOffset: 2, as: UInt64.self)
        return 10
    }
}
