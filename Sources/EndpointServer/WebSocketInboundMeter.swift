import NIOCore
import NIOWebSocket

/// Counts the bytes of WebSocket messages a client has not finished sending (a frame still
/// arriving, or the fragments of a message without its last frame) in the memory budget, as the
/// HTTP body and the line socket's unfinished line are: unfinished = bytes read − bytes of the
/// messages completed. ``WebSocketInboundMeter/RawBytes`` sits in front of the frame decoder and
/// counts what is read; ``WebSocketInboundMeter/Frames`` sits behind it and counts each frame's
/// size on the wire, completed when its message is. Over the budget the connection is closed
/// with 1008 (or cut first, when it holds the most).
///
/// Not `Sendable`: both handlers run on the channel's loop.
package final class WebSocketInboundMeter {
    fileprivate let reservation: any InboundBudget
    private var read = 0
    private var completed = 0
    private var fragments = 0
    /// Closes the connection (the budget refused its bytes, or cut it).
    private let close: () -> Void

    package init(reservation: any InboundBudget, close: @escaping () -> Void) {
        self.reservation = reservation
        self.close = close
        reservation.onCut = close
    }

    private func update() {
        if !reservation.hold(max(0, read - completed)) { close() }
    }

    fileprivate func bytesRead(_ count: Int) {
        read += count
        update()
    }

    fileprivate func frame(_ frame: WebSocketFrame) {
        let length = frame.length
        let size = 2 + (length < 126 ? 0 : length <= 0xFFFF ? 2 : 8) + (frame.maskKey == nil ? 0 : 4) + length
        let control = frame.opcode == .ping || frame.opcode == .pong || frame.opcode == .connectionClose
        if frame.fin || control {
            completed += size + (control ? 0 : fragments)
            if !control { fragments = 0 }
            update()
        } else {
            fragments += size
        }
    }

    /// First in the pipeline: counts the bytes read.
    package final class RawBytes: ChannelInboundHandler {
        package typealias InboundIn = ByteBuffer
        let meter: WebSocketInboundMeter
        package init(_ meter: WebSocketInboundMeter) { self.meter = meter }

        package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            meter.bytesRead(unwrapInboundIn(data).readableBytes)
            context.fireChannelRead(data)
        }

        /// The connection's share of the budget goes back when it closes.
        package func channelInactive(context: ChannelHandlerContext) {
            meter.reservation.release()
            context.fireChannelInactive()
        }
    }

    /// Behind the frame decoder: counts each frame.
    package final class Frames: ChannelInboundHandler {
        package typealias InboundIn = WebSocketFrame
        let meter: WebSocketInboundMeter
        package init(_ meter: WebSocketInboundMeter) { self.meter = meter }

        package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            meter.frame(unwrapInboundIn(data))
            context.fireChannelRead(data)
        }
    }
}

@available(*, unavailable)
extension WebSocketInboundMeter: Sendable {}

@available(*, unavailable)
extension WebSocketInboundMeter.RawBytes: Sendable {}

@available(*, unavailable)
extension WebSocketInboundMeter.Frames: Sendable {}
