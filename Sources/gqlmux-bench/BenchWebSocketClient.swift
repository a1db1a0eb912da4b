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

    /// The frame header being read (its bytes so far), the current frame's opcode, its
    /// payload bytes left to skip, and how many of them were skipped.
    private var header: UInt64 = 0
    private var headerCount = 0
    private var headerNeeded = 2
    private var opcode: UInt8 = 0
    private var remaining = 0
    private var position = 0

    /// Counts result frames (`{"type":"next"` or graphql-ws's `{"type":"data"`: the byte at
    /// payload offset 9) and close frames, reading only the frame headers (server frames are
    /// unmasked) and one byte of each payload, over the raw bytes; the shared counters are
    /// moved once per read, as the line client's are.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        var results = 0
        var closes = 0
        buffer.withUnsafeReadableBytes { bytes in
            var at = 0
            let count = bytes.count
            while at < count {
                if remaining > 0 {
                    let n = min(remaining, count - at)
                    if opcode == 1, position <= 9, 9 < position + n {
                        let type = bytes[at + 9 - position]
                        if type == UInt8(ascii: "n") || type == UInt8(ascii: "d") { results += 1 }
                    }
                    at += n
                    remaining -= n
                    position += n
                    continue
                }
                let byte = bytes[at]
                at += 1
                headerCount += 1
                if headerCount == 1 {
                    opcode = byte & 0x0F
                    continue
                }
                if headerCount == 2 {
                    let short = Int(byte & 0x7F)
                    headerNeeded = 2 + (short == 126 ? 2 : short == 127 ? 8 : 0)
                    header = UInt64(short)
                    if headerNeeded > 2 { header = 0 }
                } else {
                    header = header << 8 | UInt64(byte)
                }
                guard headerCount == headerNeeded else { continue }
                remaining = Int(header)
                position = 0
                headerCount = 0
                if opcode == 8 { closes += 1 }
            }
        }
        if results > 0 { frames.add(results) }
        if closes > 0 { closed.add(closes) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        probeCounters.disconnects.add(1)
        context.fireChannelInactive()
    }
}
