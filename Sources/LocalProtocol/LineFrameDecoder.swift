import NIOCore

/// Splits a stream into `\n`-terminated lines (newline stripped), refusing lines longer
/// than `maxLineBytes`.
package struct LineFrameDecoder: ByteToMessageDecoder {
    package typealias InboundOut = ByteBuffer

    package struct LineTooLong: Error, CustomStringConvertible {
        package var limit: Int
        package var description: String { "line longer than \(limit) bytes" }
    }

    /// The memory budget refused the bytes of an unfinished line.
    package struct OverBudget: Error, CustomStringConvertible {
        package var description: String { "the daemon's memory budget cannot hold this request" }
    }

    private let maxLineBytes: Int
    private var scanned = 0
    /// Told how many bytes of an unfinished line are held after each step; false refuses them.
    private let holding: ((Int) -> Bool)?

    /// - Parameter holding: told the bytes of the unfinished line held after each step (the
    ///   daemon counts them in its memory budget); returning false fails the stream with
    ///   ``OverBudget``.
    package init(maxLineBytes: Int, holding: ((Int) -> Bool)? = nil) {
        self.maxLineBytes = maxLineBytes
        self.holding = holding
    }

    package mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let view = buffer.readableBytesView
        let start = view.startIndex + scanned
        if let newline = view[start...].firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - view.startIndex
            scanned = 0
            guard length <= maxLineBytes else { throw LineTooLong(limit: maxLineBytes) }
            var line = buffer.readSlice(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            if line.readableBytes > 0, line.getInteger(at: line.writerIndex - 1, as: UInt8.self) == UInt8(ascii: "\r") {
                line.moveWriterIndex(to: line.writerIndex - 1)
            }
            if let holding, !holding(buffer.readableBytes) { throw OverBudget() }
            context.fireChannelRead(Self.wrapInboundOut(line))
            return .continue
        }
        scanned = view.count
        if scanned > maxLineBytes { throw LineTooLong(limit: maxLineBytes) }
        if let holding, !holding(scanned) { throw OverBudget() }
        return .needMoreData
    }

    package mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}
