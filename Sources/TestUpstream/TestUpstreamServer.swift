import Foundation
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// An in-process graphql-transport-ws server on 127.0.0.1 for tests and the demo.
///
/// Subscriptions (`subscription { tick }`) get a `next` on every ``tick()`` (or on a timer
/// with `tickInterval`); queries answer `{"data":{"hello":"world"}}`; mutations increment a
/// counter; documents containing `hold` are never answered; a document containing
/// `SYNTAX_ERROR` closes the whole connection with 4400, as strawberry does. It can reject
/// auth with 4403, close with any code, go silent (half-open), send malformed frames,
/// restart on the same port, and counts what it sees.
/// `@unchecked Sendable` — safe because its state is touched on its loop only (`onLoop`).
package final class TestUpstreamServer: @unchecked Sendable {
    package struct Options: Sendable {
        /// When set, `connection_init` must carry `{"token": requiredToken}` or the server closes 4403.
        package var requiredToken: String?
        package var selectSubprotocol = true
        package var sendAck = true
        /// Automatic ticks for the demo; tests call ``tick()``.
        package var tickInterval: Duration?
        /// TLS certificate and key (PEM) to serve `wss://`.
        package var tls: (certificate: String, key: String)?
        /// Closes every connection with this code right after its ack (a flapping upstream).
        package var closeAfterAck: UInt16?
        package init() {}
    }

    package let group: any EventLoopGroup
    package var tickCountOnLoop: Int { tickCount }
    private let ownsGroup: Bool
    private var loop: any EventLoop { group.next() }
    // Loop-confined state.
    var options: Options
    var stats = TestUpstreamStats() {
        didSet { statsObservers.tell() }
    }
    /// Told after each change of ``currentStats``, on the loop (what tests wait on).
    package let statsObservers = StatsObservers()
    var silent = false
    /// Open connections in the order they opened: every send goes to them in that order, the
    /// same in every run (a dictionary's order changes with each process's hash seed, and which
    /// connection a tick is written to first moved the benchmark's latency rows by 40 µs).
    var connections: [ServerConnection] = []
    var tickCount = 0
    private var serverChannel: (any Channel)?
    private var ticker: RepeatedTask?
    package private(set) var port = 0
    /// Holds `port` from the first start to the last stop, so a restart on it cannot lose it.
    private var reservation: PortReservation?

    /// - Parameter group: a one-thread group keeps every connection on one loop; one is made if nil.
    package init(options: Options = Options(), group: (any EventLoopGroup)? = nil) {
        self.options = options
        self.group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.ownsGroup = group == nil
    }

    package var url: String { (options.tls == nil ? "ws" : "wss") + "://127.0.0.1:\(port)/graphql" }

    /// Binds 127.0.0.1 (port 0 picks a free port; a restart reuses the previous one).
    package func start(port requested: Int? = nil) async throws {
        let sslContext = try options.tls.map { tls in
            try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificate).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.key, format: .pem))
                )
            )
        }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in self.initialize(channel, sslContext: sslContext) }
        if requested == nil, reservation == nil {
            let reserved = try PortReservation()
            reservation = reserved
            port = reserved.port
        }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: requested ?? port).get()
        serverChannel = channel
        port = channel.localAddress?.port ?? 0
        if let interval = options.tickInterval {
            ticker = loop.scheduleRepeatedTask(initialDelay: .nanoseconds(interval.nanoseconds), delay: .nanoseconds(interval.nanoseconds)) { _ in
                self.tickOnLoop()
            }
        }
    }

    /// Kills the server: stops listening and drops every connection without a close frame.
    package func stop() async {
        ticker?.cancel()
        ticker = nil
        try? await serverChannel?.close()
        serverChannel = nil
        await onLoop { for connection in self.connections { connection.channel.close(promise: nil) } }
        try? await Task.sleep(for: .milliseconds(20))
    }

    /// Stops and releases the event loop group it made.
    package func shutdown() async {
        await stop()
        if ownsGroup { try? await group.shutdownGracefully() }
    }

    package func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        try! await loop.submit(body).get()
    }

    package var currentStats: TestUpstreamStats { get async { await onLoop { self.stats } } }

    package func setOptions(_ change: @escaping @Sendable (inout Options) -> Void) async {
        await onLoop { change(&self.options) }
    }

    /// Half-open peer: ignore everything, answer nothing (not even WebSocket pings).
    package func setSilent(_ value: Bool) async { await onLoop { self.silent = value } }

    /// Sends `{"data":{"tick":N}}` to every active subscription; returns how many got it.
    @discardableResult
    package func tick() async -> Int { await onLoop { self.tickOnLoop() } }

    /// Sends the next tick to the connection at `index` (in the order they opened) alone, and
    /// returns its number and when the write began: the benchmark's latency rows time one path
    /// at a time from its own write, so nothing on the other path runs beside it.
    package func timedTick(to index: Int) async -> (tick: Int, written: ContinuousClock.Instant) {
        await onLoop {
            self.tickCount += 1
            let written = ContinuousClock.now
            _ = self.connections[index].tick(self.tickCount)
            return (self.tickCount, written)
        }
    }

    /// Sends `count` ticks back to back, optionally padded to `padding` extra bytes each, and
    /// flushes once at the end (as a busy server's socket coalesces them), so the benchmark's
    /// upstream is not the bottleneck it measures through.
    package func tick(count: Int, padding: Int = 0) async {
        await onLoop {
            let first = self.tickCount + 1
            self.tickCount += count
            for connection in self.connections {
                var frames = ByteBuffer()
                for n in first..<(first + count) { _ = connection.encodeTick(n, padding: padding, into: &frames) }
                connection.writeEncoded(frames)
                connection.flush()
            }
        }
    }

    /// Sends `count` ticks back to back, then completes every subscription, or closes every
    /// connection with `closeCode`, all in one flush: the daemon reads the results and the end
    /// together.
    package func tickThenEnd(count: Int, closeCode: UInt16? = nil, padding: @escaping @Sendable (Int) -> Int = { _ in 0 }) async {
        await onLoop {
            for index in 0..<count {
                self.tickCount += 1
                for connection in self.connections { _ = connection.tick(self.tickCount, padding: padding(index), flush: false) }
            }
            for connection in self.connections {
                if let closeCode { connection.close(code: closeCode, reason: "going away") } else { connection.completeAll() }
            }
        }
    }

    /// Closes every connection with a close frame.
    package func closeAll(code: UInt16, reason: String) async {
        await onLoop { for connection in self.connections { connection.close(code: code, reason: reason) } }
    }

    /// Sends a raw text frame (e.g. malformed JSON) on every connection.
    package func sendText(_ text: String) async {
        await onLoop { for connection in self.connections { connection.sendText(text) } }
    }

    /// Sends a text frame with exactly these bytes (e.g. invalid UTF-8) on every connection.
    package func sendTextBytes(_ bytes: [UInt8]) async {
        await onLoop { for connection in self.connections { connection.sendFrame(.text, ByteBuffer(bytes: bytes)) } }
    }

    package func sendBinary(_ bytes: [UInt8]) async {
        await onLoop { for connection in self.connections { connection.sendFrame(.binary, ByteBuffer(bytes: bytes)) } }
    }

    /// Sends a WebSocket-level ping frame on every connection.
    package func sendWebSocketPing(_ data: String) async {
        await onLoop { for connection in self.connections { connection.sendFrame(.ping, ByteBuffer(string: data)) } }
    }

    /// Completes every active subscription from the server side.
    package func completeAll() async {
        await onLoop { for connection in self.connections { connection.completeAll() } }
    }

    @discardableResult
    func tickOnLoop() -> Int {
        tickCount += 1
        var sent = 0
        for connection in connections { sent += connection.tick(tickCount) }
        return sent
    }

    private func initialize(_ channel: any Channel, sslContext: NIOSSLContext?) -> EventLoopFuture<Void> {
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 16 << 20,
            automaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                channel.eventLoop.submit {
                    var headers: [String: String] = [:]
                    for (name, value) in head.headers { headers[name.lowercased()] = value }
                    self.stats.lastRequestHeaders = headers
                    var response = HTTPHeaders()
                    let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",") }
                        .map { $0.trimmingCharacters(in: .whitespaces) }
                    if self.options.selectSubprotocol, offered.contains("graphql-transport-ws") {
                        response.add(name: "Sec-WebSocket-Protocol", value: "graphql-transport-ws")
                    }
                    return response
                }
            },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    let connection = ServerConnection(server: self, channel: channel)
                    try channel.pipeline.syncOperations.addHandler(
                        NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1 << 16, maxAccumulatedFrameSize: 16 << 20)
                    )
                    try channel.pipeline.syncOperations.addHandler(connection)
                }
            }
        )
        return channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            if let sslContext { try sync.addHandler(NIOSSLServerHandler(context: sslContext)) }
            try sync.configureHTTPServerPipeline(
                withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }),
                withErrorHandling: true
            )
        }
    }
}
