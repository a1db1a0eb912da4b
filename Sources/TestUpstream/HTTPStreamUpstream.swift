import NIOCore
import NIOHTTP1
import NIOPosix

/// An in-process HTTP/1.1 server on 127.0.0.1 that answers every POST with a subscription
/// stream, multipart (Apollo subscriptionSpec 1.0) or SSE (graphql-sse), and sends `tick`
/// results to all open streams on command: the benchmark's HTTP streaming upstream.
///
/// `@unchecked Sendable` — safe because its state is touched on its one loop only: inside
/// `onLoop` (`loop.submit`), and in `opened`/`closed`, which its connections' handlers call
/// there and which precondition it.
package final class HTTPStreamUpstream: @unchecked Sendable {
    package enum Flavor: Sendable {
        case multipart, sse
    }

    private let flavor: Flavor
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// Its one thread: the server and every connection it accepts run here.
    private var loop: any EventLoop { group.next() }
    private var server: (any Channel)?
    private var streams: [ObjectIdentifier: any Channel] = [:]
    private var tickCount = 0
    package private(set) var port = 0

    package init(flavor: Flavor) { self.flavor = flavor }

    package var url: String { "http://127.0.0.1:\(port)/graphql" }

    package func start() async throws {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(StreamRequestHandler(upstream: self))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        server = channel
        port = channel.localAddress?.port ?? 0
    }

    package func shutdown() async {
        try? await server?.close()
        await onLoop { for stream in self.streams.values { stream.close(promise: nil) } }
        try? await group.shutdownGracefully()
    }

    package func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        try! await loop.submit(body).get()
    }

    /// Streams open now (one per distinct upstream subscription).
    package var activeStreams: Int { get async { await onLoop { self.streams.count } } }

    /// Sends `count` results `{"data":{"tick":N,"pad":"…"}}` to every stream, flushed once at
    /// the end, so the upstream is not the bottleneck the benchmark measures through.
    package func tick(count: Int, padding: Int = 0) async {
        await onLoop {
            let pad = padding > 0 ? #","pad":"\#(String(repeating: "x", count: padding))""# : ""
            for _ in 0..<count {
                self.tickCount += 1
                let result = #"{"data":{"tick":\#(self.tickCount)\#(pad)}}"#
                let framed: String =
                    switch self.flavor {
                    case .multipart: "\r\ncontent-type: application/json\r\n\r\n{\"payload\":\(result)}\r\n--graphql"
                    case .sse: "event: next\ndata: \(result)\n\n"
                    }
                for stream in self.streams.values {
                    stream.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: framed))), promise: nil)
                }
            }
            for stream in self.streams.values { stream.flush() }
        }
    }

    fileprivate func opened(_ channel: any Channel) {
        loop.preconditionInEventLoop()
        var headers = HTTPHeaders()
        switch flavor {
        case .multipart: headers.add(name: "Content-Type", value: #"multipart/mixed;boundary="graphql";subscriptionSpec=1.0"#)
        case .sse: headers.add(name: "Content-Type", value: "text/event-stream")
        }
        headers.add(name: "Transfer-Encoding", value: "chunked")
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)), promise: nil)
        if flavor == .multipart { channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: "\r\n--graphql"))), promise: nil) }
        channel.flush()
        streams[ObjectIdentifier(channel)] = channel
    }

    fileprivate func closed(_ channel: any Channel) {
        loop.preconditionInEventLoop()
        streams[ObjectIdentifier(channel)] = nil
    }
}

private final class StreamRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    private let upstream: HTTPStreamUpstream

    init(upstream: HTTPStreamUpstream) { self.upstream = upstream }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { upstream.opened(context.channel) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream.closed(context.channel)
        context.fireChannelInactive()
    }
}
