import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP client of gqlmuxd's local GraphQL endpoint (its Unix socket) that POSTs one
/// subscription as SSE or multipart and counts the results streamed back, for the benchmark. It
/// reads raw bytes (no HTTP decoder: the client must cost less than the daemon it measures) and
/// counts each event's fixed opening across reads.
/// `@unchecked Sendable` — safe because `channelRead` runs on its channel's loop and touches
/// only `counter` (its own) and `results` (lock-protected).
final class BenchHTTPStreamClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    enum Kind: String {
        case sse, multipart

        var accept: String { self == .sse ? "text/event-stream" : "multipart/mixed;subscriptionSpec=1.0" }
        /// What opens every result and nothing else; its first byte is found once per result
        /// (memchr), as the line clients' newline is, so every kind's reader costs about the
        /// same: multipart's `{"payload":` alone began with a byte each result holds three of.
        var marker: String { self == .sse ? "event: next" : "json\r\n\r\n{\"payload\":" }
    }

    /// Results; the restart probe reads them with the connection's end.
    let probeCounters = ProbeCounters()
    var results: ManagedAtomicCounter { probeCounters.results }
    private var counter: MarkerCounter
    private(set) var channel: (any Channel)?

    private init(kind: Kind) { counter = MarkerCounter(kind.marker) }

    static func subscribe(_ path: String, group: any EventLoopGroup, kind: Kind, query: String) async throws -> BenchHTTPStreamClient {
        let client = BenchHTTPStreamClient(kind: kind)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(client) } }
            .connect(unixDomainSocketPath: path).get()
        let body = #"{"query":"\#(query)"}"#
        let request =
            "POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: \(kind.accept)\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        client.channel = channel
        return client
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let found = unwrapInboundIn(data).withUnsafeReadableBytes { counter.feed($0).results }
        if found > 0 { results.add(found) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        probeCounters.disconnects.add(1)
        context.fireChannelInactive()
    }
}
