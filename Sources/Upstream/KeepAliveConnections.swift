import NIOCore
import NIOHTTP1
import NIOSSL

/// HTTP/1.1 connections to `http_url` kept open between queries and mutations, one request at a
/// time each (no pipelining). A connection goes back to the idle list after a whole response
/// that did not say `Connection: close`; it is closed after ``idleTimeout`` unused, when more
/// than ``maxIdle`` are idle, or when the server closes it (it leaves the list at once).
///
/// States of one connection: connecting → busy → (whole response, reusable) idle → busy → …;
/// any failure, `Connection: close`, a timeout or a cancel → closed.
///
/// Confined to the owner's event loop. `@unchecked Sendable` — safe because of that: every
/// method preconditions the loop, and its connections' channels run on it.
final class KeepAliveConnections: @unchecked Sendable {
    struct Connection {
        var channel: any Channel
        var reader: KeepAliveReader
    }

    static let maxIdle = 8
    static let idleTimeout: TimeAmount = .seconds(30)

    private let eventLoop: any EventLoop
    private var idle: [(connection: Connection, expiry: Scheduled<Void>)] = []
    /// Connections opened over the pool's life, for tests and the closing note's count.
    private(set) var opened = 0

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// An idle connection still open, if any (newest first: the least likely to be timed out by
    /// the server).
    func take() -> Connection? {
        eventLoop.preconditionInEventLoop()
        while let (connection, expiry) = idle.popLast() {
            expiry.cancel()
            if connection.channel.isActive { return connection }
        }
        return nil
    }

    /// A new connection whose responses `KeepAliveReader` reads.
    func open(url: HTTPURL, proxy: HTTPProxy?, sslContext: NIOSSLContext?, connectTimeout: TimeAmount) -> EventLoopFuture<Connection> {
        eventLoop.preconditionInEventLoop()
        opened += 1
        let reader = KeepAliveReader()
        return StreamChannels.connectHTTP1(
            url: url,
            proxy: proxy,
            sslContext: sslContext,
            connectTimeout: connectTimeout,
            on: eventLoop
        ) { reader }
        .map { Connection(channel: $0, reader: reader) }
    }

    /// Back to the idle list after a whole, reusable response.
    func release(_ connection: Connection) {
        eventLoop.preconditionInEventLoop()
        guard connection.channel.isActive, idle.count < Self.maxIdle else {
            connection.channel.close(promise: nil)
            return
        }
        let channel = connection.channel
        let expiry = eventLoop.scheduleTask(in: Self.idleTimeout) {
            self.idle.removeAll { $0.connection.channel === channel }
            channel.close(promise: nil)
        }
        idle.append((connection, expiry))
        connection.reader.closed = { [weak self] in
            self?.idle.removeAll { entry in
                guard entry.connection.channel === channel else { return false }
                entry.expiry.cancel()
                return true
            }
        }
    }

    /// Closes every idle connection (a reload to another URL, or the daemon stopping).
    func closeAll() {
        eventLoop.preconditionInEventLoop()
        for (connection, expiry) in idle {
            expiry.cancel()
            connection.channel.close(promise: nil)
        }
        idle = []
    }
}

/// Reads the responses of one kept-alive connection, one request at a time. `@unchecked
/// Sendable` — its channel and its owner share one event loop, where all of it runs.
final class KeepAliveReader: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    enum Outcome {
        /// A whole response; `reusable` unless it said `Connection: close` (or was HTTP/1.0).
        case response(HTTPResponse, reusable: Bool)
        /// The connection failed; `sawResponse` tells whether any of the answer had come.
        case failed(any Error, sawResponse: Bool)
    }

    private var done: ((Outcome) -> Void)?
    private var limit = 0
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    /// Told when the connection closes while idle.
    var closed: (() -> Void)?

    /// The next response goes to `done`, its body bounded by `limit` bytes.
    func expect(limit: Int, _ done: @escaping (Outcome) -> Void) {
        self.limit = limit
        self.done = done
        head = nil
        body.clear()
        closed = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(var part):
            guard body.readableBytes + part.readableBytes <= limit else {
                finish(.failed(HTTPFailure("response larger than max_message_bytes (\(limit))"), sawResponse: true))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            let reusable = head.isKeepAlive
            finish(.response(HTTPResponse(status: head.status, body: body), reusable: reusable))
            if !reusable { context.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed(HTTPFailure("connection closed before a complete response"), sawResponse: head != nil))
        closed?()
        closed = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failed(error, sawResponse: head != nil))
        context.close(promise: nil)
    }

    private func finish(_ outcome: Outcome) {
        guard let done else { return }
        self.done = nil
        done(outcome)
    }
}
