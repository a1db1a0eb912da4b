import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The WebSocket upgrade of an upstream connection: NIO's client upgrader does the handshake
/// (the request key, the check of the server's accept value); after it, the pipeline gets
/// NIO's frame encoder for what gqlmuxd sends, and no frame decoder: the connection's own
/// handler reads the server's frames from the bytes (``WebSocketMessageReader``).
final class UpstreamWebSocketUpgrader: NIOHTTPClientProtocolUpgrader, Sendable {
    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []

    private let handshake: NIOWebSocketClientUpgrader
    private let upgraded: @Sendable (any Channel, HTTPResponseHead) -> EventLoopFuture<Void>

    /// - Parameter upgraded: adds the connection's handler once the server accepted; the
    ///   bytes after its answer reach that handler.
    init(upgraded: @escaping @Sendable (any Channel, HTTPResponseHead) -> EventLoopFuture<Void>) {
        self.upgraded = upgraded
        // Its pipeline handler is never called: `upgrade` below builds the pipeline instead.
        handshake = NIOWebSocketClientUpgrader(automaticErrorHandling: false) { channel, _ in channel.eventLoop.makeSucceededVoidFuture() }
    }

    func addCustom(upgradeRequestHeaders: inout HTTPHeaders) {
        handshake.addCustom(upgradeRequestHeaders: &upgradeRequestHeaders)
    }

    func shouldAllowUpgrade(upgradeResponse: HTTPResponseHead) -> Bool {
        handshake.shouldAllowUpgrade(upgradeResponse: upgradeResponse)
    }

    func upgrade(context: ChannelHandlerContext, upgradeResponse: HTTPResponseHead) -> EventLoopFuture<Void> {
        let channel = context.channel
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        }.flatMap { self.upgraded(channel, upgradeResponse) }
    }
}
