import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A graphql-transport-ws client of gqlmuxd's local GraphQL endpoint (its Unix socket), for
/// the benchmark: counts the text frames it receives.
/// `@unchecked Sendable` — safe because `channelRead` runs on its channel's loop and touches
/// its own `counter` and `frames` and `closed`, lock-protected counters (`NIOLockedValueBox`); `channel` is set once, by the
/// benchmark task that connects, before the client is handed to it.
final class BenchWebSocketClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    /// Result frames; the restart probe reads them with the connection's end.
    let probeCounters = ProbeCounters()
    var frames: ManagedAtomicCounter { probeCounters.results }
    /// Close frames received (gqlmuxd cut this client).
    let closed = ManagedAtomicCounter()
    private(set) var channel: (any Channel)?

    /// Connects to `path`, upgrades to graphql-transport-ws, sends `connection_init` and a
    /// subscribe of `query` with `id`.
    static func subscribe(
        _ path: String,
        group: any EventLoopGroup,
        id: String,
        query: String,
        subprotocol: String = "graphql-transport-ws"
    ) async throws -> BenchWebSocketClient {
        let client = BenchWebSocketClient()
        let upgraded = group.next().makePromise(of: Void.self)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                let upgrader = NIOWebSocketClientUpgrader(
                    requestKey: "dGhlIHNhbXBsZSBub25jZQ==",
                    maxFrameSize: 1 << 24,
                    automaticErrorHandling: false
                ) { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        // Frames in are counted from raw bytes (`channelRead`): NIO's decoder
                        // cost the client more than gqlmuxd spent sending, so the row measured
                        // the client. Frames out still go through NIO's encoder.
                        let sync = channel.pipeline.syncOperations
                        sync.removeHandler(try sync.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self), promise: nil)
                        try sync.addHandler(client)
                        upgraded.succeed()
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                    )
                }
            }
            .connect(unixDomainSocketPath: path).get()
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "localhost")
        headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol)
        headers.add(name: "Content-Length", value: "0")
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/graphql", headers: headers)), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        try await upgraded.futureResult.get()
        client.channel = channel
        client.send(#"{"type":"connection_init"}"#, on: channel)
        let verb = subprotocol == "graphql-ws" ? "start" : "subscribe"
        client.send(#"{"type":"\#(verb)","id":"\#(id)","payload":{"query":"\#(query)"}}"#, on: channel)
        return client
    }

    private func send(_ text: String, on channel: any Channel) {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))
        channel.writeAndFlush(frame, promise: nil)
    }

    /// Reads raw bytes: frame headers and one byte of each payload (`WebSocketFrameCounter`).
    private var counter = WebSocketFrameCounter()

    /// Counts result and close frames; the shared counters are moved once per read, as the
    /// line client's are.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let (results, closes) = buffer.withUnsafeReadableBytes { counter.feed($0) }
        if results > 0 { frames.add(results) }
        if closes > 0 { closed.add(closes) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        probeCounters.disconnects.add(1)
        context.fireChannelInactive()
    }
}
