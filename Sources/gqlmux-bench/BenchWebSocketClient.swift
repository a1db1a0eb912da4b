import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A graphql-transport-ws client of gqlmuxd's local GraphQL endpoint (its Unix socket), for
/// the benchmark: counts the text frames it receives.
/// `@unchecked Sendable` — safe because `channelRead` runs on its channel's loop and touches
/// only `frames` and `closed`, lock-protected counters (`NIOLockedValueBox`); `channel` is set once, by the
/// benchmark task that connects, before the client is handed to it.
final class BenchWebSocketClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    let frames = ManagedAtomicCounter()
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

    /// The frame header being read, the current frame's opcode, its payload bytes left to
    /// skip, and how many of them were skipped.
    private var header = [UInt8](repeating: 0, count: 10)
    private var headerCount = 0
    private var opcode: UInt8 = 0
    private var remaining = 0
    private var position = 0

    /// Counts result frames (`{"type":"next"` or graphql-ws's `{"type":"data"`: the byte at
    /// payload offset 9) and close frames, reading only the frame headers (server frames are
    /// unmasked) and one byte of each payload.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        while bytes.readableBytes > 0 {
            if remaining > 0 {
                let n = min(remaining, bytes.readableBytes)
                if opcode == 1, position <= 9, 9 < position + n, let type = bytes.getInteger(at: bytes.readerIndex + 9 - position, as: UInt8.self),
                    type == UInt8(ascii: "n") || type == UInt8(ascii: "d")
                {
                    frames.add(1)
                }
                bytes.moveReaderIndex(forwardBy: n)
                remaining -= n
                position += n
                continue
            }
            header[headerCount] = bytes.readInteger(as: UInt8.self)!
            headerCount += 1
            guard headerCount >= 2 else { continue }
            let short = Int(header[1] & 0x7F)
            let needed = 2 + (short == 126 ? 2 : short == 127 ? 8 : 0)
            guard headerCount == needed else { continue }
            opcode = header[0] & 0x0F
            remaining = short < 126 ? short : header[2..<needed].reduce(0) { $0 << 8 | Int($1) }
            position = 0
            headerCount = 0
            if opcode == 8 { closed.add(1) }
        }
    }
}
