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
/// only `carry` (its own) and `results` (lock-protected).
final class BenchHTTPStreamClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    enum Kind: String {
        case sse, multipart

        var accept: String { self == .sse ? "text/event-stream" : "multipart/mixed;subscriptionSpec=1.0" }
        /// What opens every result and nothing else.
        var marker: [UInt8] { Array((self == .sse ? "event: next" : #"{"payload":"#).utf8) }
    }

    /// Results; the restart probe reads them with the connection's end.
    let probeCounters = ProbeCounters()
    var results: ManagedAtomicCounter { probeCounters.results }
    private let marker: [UInt8]
    private var carry: [UInt8] = []
    private(set) var channel: (any Channel)?

    private init(kind: Kind) { marker = kind.marker }

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
        let bytes = unwrapInboundIn(data)
        var found = 0
        bytes.withUnsafeReadableBytes { bytes in
            // A marker that straddles two reads: the last `count - 1` bytes of the previous read
            // and the first `count - 1` of this one (no whole marker fits in either part).
            let window = carry + bytes.prefix(marker.count - 1)
            window.withUnsafeBytes { found += Self.count(marker, in: $0) }
            found += Self.count(marker, in: bytes)
            carry = Array(bytes.suffix(marker.count - 1))
        }
        if found > 0 { results.add(found) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        probeCounters.disconnects.add(1)
        context.fireChannelInactive()
    }

    /// memchr for the marker's first byte, then memcmp: the client must read faster than
    /// gqlmuxd writes.
    private static func count(_ marker: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int {
        guard bytes.count >= marker.count, let base = bytes.baseAddress else { return 0 }
        var found = 0
        var index = 0
        let last = bytes.count - marker.count
        marker.withUnsafeBytes { marker in
            while index <= last, let hit = memchr(base + index, Int32(marker[0]), last - index + 1) {
                let at = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + at, marker.baseAddress!, marker.count) == 0 {
                    found += 1
                    index = at + marker.count
                } else {
                    index = at + 1
                }
            }
        }
        return found
    }
}
