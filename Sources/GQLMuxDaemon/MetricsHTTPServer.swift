import GQLMuxConfiguration
import LocalEndpoint
import NIOCore
import NIOHTTP1
import NIOPosix

/// `[metrics] listen`: serves `GET /metrics` (the Prometheus text exposition) over HTTP/1.1 on
/// the daemon's event loop, so rendering reads the daemon's state without a hop. Anything else
/// gets 404 or 405; a request body is never read into memory beyond NIO's head parser. A request
/// whose `Host` is a name other than the listen host's, or that comes from a web page, gets 400
/// or 403 (``MetricsAccess``).
enum MetricsHTTPServer {
    static func bind(
        _ address: MetricsListenAddress,
        on eventLoop: any EventLoop,
        render: @escaping @Sendable () -> [UInt8]
    ) async throws -> any Channel {
        try await ServerBootstrap(group: eventLoop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(MetricsHTTPHandler(access: MetricsAccess(listenHost: address.host), render: render))
                }
            }
            .bind(host: address.host, port: address.port).get()
    }
}

private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let access: MetricsAccess
    private let render: @Sendable () -> [UInt8]
    private var head: HTTPRequestHead?

    init(access: MetricsAccess, render: @escaping @Sendable () -> [UInt8]) {
        self.access = access
        self.render = render
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(context: context, to: head)
        }
    }

    private func respond(context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let status: HTTPResponseStatus
        var body = ByteBuffer()
        var headers = HTTPHeaders()
        let refusal = access.refusal(host: head.headers["host"], origin: head.headers["origin"], secFetchSite: head.headers["sec-fetch-site"])
        switch (head.method, path) {
        case _ where refusal != nil:
            status = HTTPResponseStatus(statusCode: refusal!.status)
            body.writeString(refusal!.message + "\n")
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            status = .ok
            headers.add(name: "Content-Type", value: DaemonMetrics.contentType)
            body.writeBytes(render())
        case (_, "/metrics"):
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "GET, HEAD")
            body.writeString("only GET /metrics\n")
        default:
            status = .notFound
            body.writeString("gqlmuxd serves /metrics only\n")
        }
        if headers["Content-Type"].isEmpty { headers.add(name: "Content-Type", value: "text/plain; charset=utf-8") }
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
