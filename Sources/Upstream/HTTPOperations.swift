import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Queries and mutations over HTTP POST (`[upstream] http_url`, GraphQL over HTTP), as Apollo's
/// `SplitNetworkTransport` sends them: they work while the WebSocket is reconnecting, paused or
/// failed. Connections are reused: over `https` whose server offers `h2`, every request is a
/// stream of one HTTP/2 connection (the HTTP streams' own, when subscriptions travel as
/// multipart or SSE); otherwise HTTP/1.1 connections are kept alive between requests
/// (``KeepAliveConnections``). A mutation is sent once and never again, so it runs exactly once
/// or fails with `CONNECTION_LOST`; a query whose kept-alive connection turns out closed before
/// any answer is sent once more on a new connection.
///
/// A hand-written HTTP/1.1 client on NIOHTTP1 (already built for the WebSocket upgrade) rather
/// than async-http-client, which would add 2.5–4.5 minutes to a cold 2-core build for one POST.
/// Confined to ``eventLoop`` like the transport; the `OnLoop` methods must be called there.
/// `@unchecked Sendable` — safe because of that: every `OnLoop` method preconditions the loop.
package final class HTTPOperations: @unchecked Sendable {
    package struct Configuration: Sendable {
        package var url: HTTPURL
        package var headers: [(name: String, value: String)]
        package var tls: UpstreamConfiguration.TLS
        package var timeout: Duration
        package var maxResponseBytes: Int
        /// The proxy that tunnels connections to `url`, if any.
        package var proxy: HTTPProxy?
        /// AppSync: every request carries the credentials, their secret read anew for each.
        package var appSync: AppSyncSettings?

        package init(
            url: HTTPURL,
            headers: [(name: String, value: String)] = [],
            tls: UpstreamConfiguration.TLS = .init(),
            timeout: Duration = .seconds(30),
            maxResponseBytes: Int = 16 << 20,
            proxy: HTTPProxy? = nil
        ) {
            self.proxy = proxy
            self.url = url
            self.headers = headers
            self.tls = tls
            self.timeout = timeout
            self.maxResponseBytes = maxResponseBytes
        }
    }

    package let eventLoop: any EventLoop
    private var configuration: Configuration
    private var sslContext: NIOSSLContext?
    /// A request not yet answered: its promise, and its connection once it is open.
    private struct Request {
        var promise: EventLoopPromise<HTTPResponse>
        var payload: ByteBuffer
        var kind: OperationKind
        var configuration: Configuration
        var started = false
        var channel: (any Channel)?
    }

    private var pending: [OperationID: Request] = [:]
    /// Requests waiting for one of the `maxInFlight` places, oldest first.
    private var waiting: [OperationID] = []
    private var inFlight = 0
    /// Where every request's result goes (the fan-out).
    /// Set by its owner before the first send: while the daemon is being built (nothing
    /// runs on the loop yet) or on the loop; read on the loop only.
    package var updates: OperationSink = { _, _ in }

    /// HTTP/2 connections (`https` with `h2`); the HTTP streams' when shared.
    private let channels: StreamChannels
    private let keepAlive: KeepAliveConnections
    /// Reads AppSync's secret off the loop.
    private let secrets: ConnectingPayloadSource

    /// - Parameters:
    ///   - sslContext: for an https:// `url` (``PreparedUpstream/httpTLS``), built off the loop.
    ///   - streams: the HTTP streams to the same `url`, whose HTTP/2 connection requests share.
    package init(configuration: Configuration, sslContext: NIOSSLContext?, eventLoop: any EventLoop, sharingWith streams: HTTPStreamTransport? = nil) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.sslContext = sslContext
        self.channels = streams?.channels ?? StreamChannels(eventLoop: eventLoop)
        self.keepAlive = KeepAliveConnections(eventLoop: eventLoop)
        self.secrets = ConnectingPayloadSource(eventLoop: eventLoop)
    }

    /// HTTP/1.1 connections opened so far (each then reused while kept alive).
    package var connectionsOpenedOnLoop: Int {
        eventLoop.preconditionInEventLoop()
        return keepAlive.opened
    }

    /// Builds the TLS context here (blocking: call it off the event loop).
    package convenience init(configuration: Configuration, eventLoop: any EventLoop) throws {
        let sslContext = try configuration.tls.clientContext(secure: configuration.url.secure, alpn: ["h2", "http/1.1"])
        self.init(configuration: configuration, sslContext: sslContext, eventLoop: eventLoop)
    }

    /// Applies a reloaded configuration, its TLS context already built, to the requests that
    /// start from now on; cannot fail.
    package func applyOnLoop(_ configuration: Configuration, sslContext: NIOSSLContext?) {
        eventLoop.preconditionInEventLoop()
        self.sslContext = sslContext
        self.configuration = configuration
        keepAlive.closeAll()  // new requests connect with the new settings
    }

    /// At most this many requests are on the wire at once; the others wait their turn in order
    /// (within `http_timeout`), so a flood of queries from one client cannot exhaust sockets.
    package static let maxInFlight = 32

    /// POSTs `payload` (the request object: query, variables, operationName, extensions) for
    /// operation `id` and tells ``updates`` the result (`next`, then `completed`) or the failure.
    package func sendOnLoop(_ id: OperationID, kind: OperationKind = .query, payload: ByteBuffer) {
        eventLoop.preconditionInEventLoop()
        let configuration = self.configuration
        let url = configuration.url
        let done = eventLoop.makePromise(of: HTTPResponse.self)
        pending[id] = Request(promise: done, payload: payload, kind: kind, configuration: configuration)
        let timeout = eventLoop.scheduleTask(in: .nanoseconds(configuration.timeout.nanoseconds)) {
            done.fail(HTTPFailure("no answer from \(url.shown) within \(configuration.timeout.seconds)s"))
        }
        done.futureResult.whenComplete { result in
            timeout.cancel()
            if let request = self.pending.removeValue(forKey: id) {
                request.channel?.close(promise: nil)
                if request.started { self.inFlight -= 1 }
            }
            self.waiting.removeAll { $0 == id }
            self.startWaiting()
            switch result {
            case .success(let response):
                for update in Self.updates(for: response, url: url) { self.updates(id, update) }
            case .failure(let error):
                let message = "\(describe(connectTo: url.shown, error)); the operation was not retried"
                self.updates(id, .finished(.error(.transport(.connectionLost(reason: message)))))
            }
        }
        guard let appSync = configuration.appSync else {
            waiting.append(id)
            return startWaiting()
        }
        // AppSync: the request waits for its credentials (within the same timeout).
        secrets.readAppSync(appSync.auth).whenComplete { result in
            guard self.pending[id] != nil else { return }
            switch result {
            case .success(let secret):
                let signed = appSync.httpHeaders(secret, target: url.target, body: Array(payload.readableBytesView), time: wallClockSeconds())
                // The authorization replaces a header of the same name (an identity lane's own
                // `authorization` is also among the forwarded headers): sent once.
                let names = Set(signed.map { $0.name.lowercased() })
                self.pending[id]?.configuration.headers.removeAll { names.contains($0.name.lowercased()) }
                self.pending[id]?.configuration.headers += signed
                self.waiting.append(id)
                self.startWaiting()
            case .failure(let error):
                done.fail(HTTPFailure("\(error)"))
            }
        }
    }

    /// Starts waiting requests, oldest first, while fewer than `maxInFlight` are on the wire.
    private func startWaiting() {
        while inFlight < Self.maxInFlight, !waiting.isEmpty {
            let id = waiting.removeFirst()
            guard let request = pending[id] else { continue }
            pending[id]?.started = true
            inFlight += 1
            start(id, request)
        }
    }

    /// - Parameter reuse: false to open a new HTTP/1.1 connection whatever is idle.
    private func start(_ id: OperationID, _ request: Request, reuse: Bool = true) {
        let configuration = request.configuration
        let url = configuration.url
        let done = request.promise
        let limit = configuration.maxResponseBytes
        let connectTimeout = TimeAmount.nanoseconds(configuration.timeout.nanoseconds)
        if url.secure, let sslContext, !channels.isHTTP1 {
            // A stream of the shared HTTP/2 connection (or, the first time a server chooses
            // HTTP/1.1, a connection of its own, closed after the answer).
            channels.open(url: url, proxy: configuration.proxy, sslContext: sslContext, connectTimeout: connectTimeout) {
                ResponseCollector(promise: done, limit: limit)
            }
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    guard self.pending[id] != nil else {  // answered (timeout) or cancelled meanwhile
                        channel.close(promise: nil)
                        return
                    }
                    self.pending[id]?.channel = channel
                    Self.write(request.payload, configuration: configuration, to: channel)
                case .failure(let error):
                    done.fail(error)
                }
            }
            return
        }
        if reuse, let connection = keepAlive.take() {
            send(id, request, on: connection, reused: true)
            return
        }
        keepAlive.open(url: url, proxy: configuration.proxy, sslContext: sslContext, connectTimeout: connectTimeout).whenComplete { result in
            switch result {
            case .success(let connection):
                guard self.pending[id] != nil else {
                    connection.channel.close(promise: nil)
                    return
                }
                self.send(id, request, on: connection, reused: false)
            case .failure(let error):
                done.fail(error)
            }
        }
    }

    /// Sends `request` on a kept-alive HTTP/1.1 connection; a whole, reusable answer puts the
    /// connection back in the idle list.
    private func send(_ id: OperationID, _ request: Request, on connection: KeepAliveConnections.Connection, reused: Bool) {
        pending[id]?.channel = connection.channel
        let done = request.promise
        connection.reader.expect(limit: request.configuration.maxResponseBytes) { outcome in
            switch outcome {
            case .response(let response, let reusable):
                self.pending[id]?.channel = nil  // no longer this request's to close
                if reusable { self.keepAlive.release(connection) }
                done.succeed(response)
            case .failed(let error, let sawResponse):
                connection.channel.close(promise: nil)
                // A kept-alive connection the server had closed meanwhile: no answer came. A
                // query is sent again on a new connection; a mutation never is (it may have run).
                if reused, !sawResponse, request.kind != .mutation, self.pending[id] != nil {
                    self.pending[id]?.channel = nil
                    self.start(id, request, reuse: false)
                } else {
                    done.fail(error)
                }
            }
        }
        Self.write(request.payload, configuration: request.configuration, to: connection.channel)
    }

    /// The client no longer wants `id`: its connection is closed (a mutation already sent may
    /// still run on the server; it is never sent again).
    package func cancelOnLoop(_ id: OperationID) {
        eventLoop.preconditionInEventLoop()
        // The completion handler of `sendOnLoop` forgets it, closes its connection and frees
        // its place for the next waiting request.
        pending[id]?.promise.fail(HTTPFailure("cancelled"))
    }

    /// Ends every request in flight (daemon stop).
    package func shutdownOnLoop() {
        eventLoop.preconditionInEventLoop()
        for id in Array(pending.keys) { cancelOnLoop(id) }
        keepAlive.closeAll()
    }

    private static func write(_ payload: ByteBuffer, configuration: Configuration, to channel: any Channel) {
        StreamChannels.writePOST(
            payload,
            to: configuration.url,
            accept: "application/graphql-response+json, application/json",
            headers: configuration.headers,
            close: false,
            on: channel
        )
    }

    /// A JSON object body is the ExecutionResult, whatever the status (GraphQL over HTTP puts
    /// request errors in one with a 4xx); anything else ends the operation with
    /// `connectionLost`, naming the status.
    static func updates(for response: HTTPResponse, url: HTTPURL) -> [OperationUpdate] {
        let isObject = response.body.withUnsafeReadableBytes { (try? JSONScanner.scanObject($0)) != nil }
        if isObject {
            return [.next(response.body), .finished(.completed)]
        }
        // No GraphQL answer (a proxy's error page, an empty body): the operation failed in
        // transit, told with the contract's CONNECTION_LOST like a dropped connection.
        let reason = "HTTP \(response.status.code) \(response.status.reasonPhrase) from \(url.shown) is not a GraphQL response; the operation was not retried"
        return [.finished(.error(.transport(.connectionLost(reason: reason))))]
    }
}

struct HTTPResponse {
    var status: HTTPResponseStatus
    var body: ByteBuffer
}

struct HTTPFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Collects one response, bounded by `limit` bytes of body.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponse>
    private let limit: Int
    private var status: HTTPResponseStatus?
    private var body = ByteBuffer()

    init(promise: EventLoopPromise<HTTPResponse>, limit: Int) {
        self.promise = promise
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
        case .body(var part):
            guard body.readableBytes + part.readableBytes <= limit else {
                promise.fail(HTTPFailure("response larger than max_message_bytes (\(limit))"))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&part)
        case .end:
            guard let status else { return }
            promise.succeed(HTTPResponse(status: status, body: body))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTPFailure("connection closed before a complete response"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}

extension HTTPURL {
    /// The URL as an app's error message shows it: without its query string, where some
    /// servers take a key (every local app may read what it is told).
    var shown: String { shownURL(description) }
}
