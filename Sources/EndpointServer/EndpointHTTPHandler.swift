import GQLMuxVocabulary
import HTTPFields
import Handover
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOHTTP1
import RequestValidation

/// GraphQL over HTTP on the endpoint, in front of the connection's session (``EndpointSession``, added at
/// the first request): each request becomes one `subscribe` request, its answer a JSON response
/// or a stream (``HTTPExchange`` decides). NIO's server pipeline hands over a pipelined request
/// only after the answer before it has ended, so one exchange runs at a time; a stream ends its
/// connection.
///
/// Not `Sendable`: NIO calls it on its channel's loop, and the heartbeat timer reaches it
/// through a `NIOLoopBound`, checked on that loop.
package final class EndpointHTTPHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = ClientRequest
    package typealias OutboundIn = HTTPOutput
    package typealias OutboundOut = HTTPServerResponsePart

    private let path: String
    private let maxBodyBytes: Int
    private let listener: ClientOrigin
    /// The control plane; the daemon owns the listeners, so it outlives this handler.
    private unowned let host: any EndpointHost
    /// The body of the request in progress, counted in the memory budget.
    private let reservation: any InboundBudget
    private let makeSession: (any Channel) -> any EndpointSession
    /// First in the pipeline: a stream's sealed chunks go through it, below the HTTP codec.
    private let writer: EncodedFrameWriter
    private var session: (any EndpointSession)?
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var tooLarge = false
    /// The request in progress was answered at its head (refused); its other parts are ignored.
    private var answered = false
    /// An answer that ends the connection was sent; whatever else arrives is ignored.
    private var closingConnection = false
    /// The allowed browser origin of the request in progress, echoed for CORS.
    private var corsOrigin: String?
    private var exchange: HTTPExchange?
    private var heartbeat: RepeatedTask?
    private var requests = 0
    private var timeouts: HTTPConnectionTimeouts
    private var timer: Scheduled<Void>?
    /// When the armed `timer` fires.
    private var timerDeadline: Instant?

    package init(
        path: String,
        maxBodyBytes: Int,
        listener: ClientOrigin,
        host: any EndpointHost,
        reservation: any InboundBudget,
        writer: EncodedFrameWriter,
        makeSession: @escaping (any Channel) -> any EndpointSession
    ) {
        self.path = path
        self.maxBodyBytes = maxBodyBytes
        self.listener = listener
        self.host = host
        self.reservation = reservation
        self.makeSession = makeSession
        self.writer = writer
        // Counted from when the handler joins its channel's loop (``handlerAdded``).
        self.timeouts = HTTPConnectionTimeouts(connectedAt: Instant(nanoseconds: 0))
    }

    /// Now on the clock of `loop`, the handler's own (an `EmbeddedEventLoop`'s in tests, so every
    /// timeout runs on a manual clock there).
    private static func now(_ loop: any EventLoop) -> Instant { Instant(nanoseconds: Int64(loop.now.uptimeNanoseconds)) }

    /// This handler's own context while it is in the pipeline, for ``bytesArrived()``.
    private var context: ChannelHandlerContext?
    /// The handler in front of the HTTP decoder (set when both are added).
    package weak var activity: HTTPActivity?

    /// The connection went to the next process: nothing more is written from this one (no
    /// heartbeat, no timeout's answer).
    private var handedOver = false

    /// Carried over a restart: `exchange`'s stream goes on here, into `session` (added after
    /// this handler by the caller). Called before this handler is added.
    package func resume(_ exchange: HTTPExchange, session: any EndpointSession) {
        self.exchange = exchange
        self.session = session
        session.framing = exchange.framing
        session.inbound = reservation
        session.wire = self
        requests = 1
        timeouts.requestEnded()  // its answer (the stream) is on the way
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if requests == 0 { timeouts = HTTPConnectionTimeouts(connectedAt: Self.now(context.eventLoop), limits: timeouts.limits) }
        if exchange != nil { startHeartbeat(context) }
        armTimer(context)
        reservation.onCut = { [unowned self] in
            guard let context = self.context else { return }
            self.body = nil
            self.answered = true
            self.reject(503, "gqlmuxd's memory budget (total_buffer_bytes) cannot hold this request now; try again later", context: context, close: true)
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        reservation.release()
        reservation.onCut = {}
        timer?.cancel()
        timer = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closingConnection else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            timeouts.headReceived(at: Self.now(context.eventLoop))
            armTimer(context)
            self.head = head
            body = nil
            tooLarge = false
            answered = false
            corsOrigin = nil
            admit(head, context: context)
        case .body(var part):
            guard !answered, !tooLarge else { return }
            let size = (body?.readableBytes ?? 0) + part.readableBytes
            if size > maxBodyBytes {
                tooLarge = true
                body = nil
                reservation.release()
                return
            }
            guard reservation.hold(size) else {
                body = nil
                answered = true
                return reject(503, "gqlmuxd's memory budget (total_buffer_bytes) cannot hold this request now; try again later", context: context, close: true)
            }
            if body == nil { body = part } else { body!.writeBuffer(&part) }
        case .end:
            timeouts.requestEnded()
            guard let head else { return }
            self.head = nil
            if answered { return }
            request(head, context: context)
            body = nil
            reservation.release()
        }
    }

    /// Bytes arrived on the connection (``HTTPActivity`` sees them before the decoder).
    package func bytesArrived() {
        guard let context, !closingConnection else { return }
        timeouts.bytesArrived(at: Self.now(context.eventLoop))
        armTimer(context)
    }

    // MARK: - Access

    /// The browser checks, then the token on the TCP port; a refused request is answered now.
    private func admit(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        switch host.endpointAccess.check(Self.accessHeaders(head)) {
        case .refuse(let status, let reason, let message):
            answered = true
            host.endpointRefused(
                .requestRefused,
                listener: listener,
                fields: Self.requestFields(head, reason: reason.rawValue),
                message: "request refused (\(reason.rawValue)): \(message)"
            )
            reject(status, message, context: context, close: true)
        case .allow(let origin):
            corsOrigin = origin
            guard head.method != .OPTIONS, listener == .endpointTCP, let token = host.endpointToken else { return }
            guard token.check(authorization: head.headers["authorization"]) == .valid else {
                answered = true
                host.endpointRefused(
                    .unauthorized,
                    listener: listener,
                    fields: Self.requestFields(head, reason: head.headers["authorization"].isEmpty ? "missing_token" : "wrong_token"),
                    message: "request without a valid token refused (401)"
                )
                reject(401, "this endpoint needs Authorization: Bearer <token> ([graphql_endpoint] token_file)", context: context, close: true)
                return
            }
        }
    }

    /// The headers the browser checks read.
    package static func accessHeaders(_ head: HTTPRequestHead) -> EndpointAccess.Headers {
        EndpointAccess.Headers(host: head.headers["host"], origin: head.headers["origin"], secFetchSite: head.headers["sec-fetch-site"])
    }

    /// Journal fields describing a refused request (printable, bounded: they are the peer's words).
    package static func requestFields(_ head: HTTPRequestHead, reason: String) -> [String: String] {
        var fields = ["GQLMUX_REASON": reason, "GQLMUX_METHOD": EndpointAccess.printable(head.method.rawValue)]
        if let host = head.headers.first(name: "host") { fields["GQLMUX_HOST"] = EndpointAccess.printable(host) }
        if let origin = head.headers.first(name: "origin") { fields["GQLMUX_ORIGIN"] = EndpointAccess.printable(origin) }
        if let site = head.headers.first(name: "sec-fetch-site") { fields["GQLMUX_FETCH_SITE"] = EndpointAccess.printable(site) }
        return fields
    }

    // MARK: - Timeouts

    /// Arms the timer for the current deadline, unless one is armed for that time or earlier
    /// (a timer that fires early finds nothing expired and re-arms itself for the new deadline).
    private func armTimer(_ context: ChannelHandlerContext) {
        guard let deadline = timeouts.deadline else { return }
        if let armed = timerDeadline, armed <= deadline.at, timer != nil { return }
        timer?.cancel()
        timerDeadline = deadline.at
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        let wait = max(deadline.at - Self.now(context.eventLoop), .zero)
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(wait.nanoseconds)) {
            let (context, handler) = bound.value
            handler.timer = nil
            handler.timerDeadline = nil
            handler.timerFired(context)
        }
    }

    private func timerFired(_ context: ChannelHandlerContext) {
        guard let timeout = timeouts.expired(at: Self.now(context.eventLoop)) else { return armTimer(context) }
        host.endpointRefused(
            .requestTimeout,
            listener: listener,
            fields: ["GQLMUX_TIMEOUT": timeout.rawValue],
            message: "HTTP connection closed: \(timeout.rawValue) timeout"
        )
        switch timeout {
        case .header:
            // No head reached the HTTP layer: the answer goes out raw, in front of it.
            closingConnection = true
            activity?.closeWithRawAnswer(
                HTTPErrorResponse.raw(status: 408, reason: "Request Timeout", message: "the request headers were not complete in time (header timeout)")
            )
        case .body:
            answered = true
            reject(408, "the request body was not complete in time (body timeout)", context: context, close: true)
        case .keepAlive:
            context.close(promise: nil)
        }
    }

    private func request(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        // NIO's HTTPServerPipelineHandler holds a pipelined request until the answer before it
        // ended; a request during a stream (which ends its connection) cannot be answered.
        guard exchange == nil else { return context.close(promise: nil) }
        let target = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let upstream = host.upstream(target: target.first ?? "", path: path) else {
            if case .upstream(let name?) = EndpointTarget(target.first ?? "", path: path) {
                return reject(404, "no upstream is named '\(name.prefix(64))' (UNKNOWN_UPSTREAM)", context: context)
            }
            return reject(404, "the GraphQL endpoint is \(path)", context: context)
        }
        guard !tooLarge else { return reject(413, "the request is larger than max_line_bytes (\(maxBodyBytes))", context: context, close: true) }
        if head.method == .OPTIONS { return preflight(head, context: context) }
        requests += 1
        let limits = host.documentLimits
        // Parsed once, here: its kind picks the answer's mode, and the session gets the result.
        var parsed: Result<SubscribeRequest, SubscribeRequest.Invalid>?
        let start = HTTPExchange.start(
            method: head.method.rawValue,
            accept: head.headers["accept"].joined(separator: ","),
            contentType: head.headers.first(name: "content-type"),
            body: body,
            queryItems: target.count > 1 ? HTTPExchange.queryItems(target[1]) : [],
            id: "http-\(requests)"
        ) { request -> OperationKind? in
            let result = SubscribeRequest.parsed(request, limits: limits)
            parsed = result
            return try? result.get().kind
        }
        switch start {
        case .reject(let status, let message):
            reject(status, message, context: context)
        case .subscribe(let request, var exchange):
            let opening = exchange.opening()
            self.exchange = exchange
            write(opening, context: context)
            startHeartbeat(context)
            context.flush()
            if session == nil {
                let session = makeSession(context.channel)
                session.inbound = reservation
                session.wire = self
                self.session = session
                do {
                    try context.pipeline.syncOperations.addHandler(session, position: .after(self))
                } catch {
                    context.close(promise: nil)
                    return
                }
            }
            session?.framing = exchange.framing  // before the subscribe: its results come framed
            session?.present(PresentedCredential(headers: host.presentedHeaders(head.headers)))
            // `start` read the kind of every request it subscribes, so the document was parsed.
            let subscribe = ClientRequest.subscribe(id: exchange.id, (parsed ?? SubscribeRequest.parsed(request, limits: limits)).forUpstream(upstream))
            context.fireChannelRead(wrapInboundOut(subscribe))
        }
    }

    /// A stream's keep-alive (multipart every 5 s, SSE every 12 s).
    private func startHeartbeat(_ context: ChannelHandlerContext) {
        guard let beat = exchange?.heartbeat, let mode = exchange?.mode else { return }
        let interval: TimeAmount = mode == .multipart ? .seconds(5) : .seconds(12)
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        heartbeat = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (context, handler) = bound.value
            context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(beat))), promise: nil)
        }
    }

    /// The session's output: a stream's results, already framed; its messages, the current
    /// exchange's answer.
    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if handedOver, case .message = unwrapOutboundIn(data) {
            promise?.succeed()
            return
        }
        let message: SessionMessage
        switch unwrapOutboundIn(data) {
        case .body(let events):
            // Framed by the session as SSE events or multipart parts: one body part (one HTTP
            // chunk) for all of them, flushed when the session flushes. The exchange is not
            // copied for it (that retained each of its fields on every write).
            guard exchange != nil else {
                promise?.succeed()
                return
            }
            context.write(wrapOutboundOut(.body(.byteBuffer(events))), promise: promise)
            return
        case .chunk(let chunk):
            // The same, sealed by the session as a whole chunk: past the HTTP handlers, as one
            // buffer (the codec writes a chunk as three).
            guard exchange != nil else {
                promise?.succeed()
                return
            }
            writer.write(chunk, flush: false, promise: promise)
            return
        case .message(let value):
            message = value
        }
        guard var exchange else {
            promise?.succeed()
            return
        }
        let outputs = exchange.deliver(message)
        self.exchange = exchange.ended ? nil : exchange
        if exchange.ended {
            heartbeat?.cancel()
            heartbeat = nil
        }
        let streaming = exchange.mode == .sse || exchange.mode == .multipart
        write(outputs, context: context)
        promise?.succeed()
        if exchange.ended, streaming {
            context.flush()
            context.close(promise: nil)
        } else if exchange.ended {
            timeouts.responseEnded(at: Self.now(context.eventLoop))
            armTimer(context)
        }
    }

    /// `OPTIONS`: a CORS preflight from an allowed origin is answered with what it may send;
    /// any other gets the methods (the browser checks already refused foreign origins).
    private func preflight(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        if let origin = corsOrigin, let method = head.headers.first(name: "access-control-request-method") {
            guard method == "GET" || method == "POST" else {
                return reject(405, "use POST, or GET for queries", context: context)
            }
            headers.add(name: "Access-Control-Allow-Origin", value: origin)
            headers.add(name: "Access-Control-Allow-Methods", value: "GET, POST")
            let requested = head.headers["access-control-request-headers"].joined(separator: ",")
            let allowed = requested.split(separator: ",").map { $0.trimming().lowercased() }.filter { name in
                !name.isEmpty && name.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) }
            }
            if !allowed.isEmpty { headers.add(name: "Access-Control-Allow-Headers", value: allowed.joined(separator: ", ")) }
            if head.headers.first(name: "access-control-request-private-network") == "true" {
                headers.add(name: "Access-Control-Allow-Private-Network", value: "true")
            }
            headers.add(name: "Access-Control-Max-Age", value: "600")
            headers.add(name: "Vary", value: "Origin")
        } else {
            headers.add(name: "Allow", value: "GET, POST, OPTIONS")
        }
        headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .noContent, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        timeouts.responseEnded(at: Self.now(context.eventLoop))
        armTimer(context)
    }

    /// CORS headers of an answer to an allowed browser origin.
    private func addCORS(_ headers: inout HTTPHeaders) {
        guard let corsOrigin else { return }
        headers.add(name: "Access-Control-Allow-Origin", value: corsOrigin)
        headers.add(name: "Vary", value: "Origin")
    }

    private func write(_ outputs: [HTTPExchange.Output], context: ChannelHandlerContext) {
        for (index, output) in outputs.enumerated() {
            switch output {
            case .head(let status, let contentType):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: contentType)
                addCORS(&headers)
                // A whole answer at once (JSON): its length is known.
                if index + 2 < outputs.count, case .body(let body) = outputs[index + 1], outputs[index + 2] == .end {
                    headers.add(name: "Content-Length", value: "\(body.readableBytes)")
                }
                if contentType == "text/event-stream" {
                    headers.add(name: "Cache-Control", value: "no-cache")
                    headers.add(name: "Connection", value: "close")
                } else if contentType.hasPrefix("multipart/") {
                    headers.add(name: "Connection", value: "close")
                }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
            case .body(let bytes):
                context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
            case .end:
                context.write(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
        if !outputs.isEmpty { context.flush() }
    }

    private func reject(_ status: Int, _ message: String, context: ChannelHandlerContext, close: Bool = false) {
        let body = HTTPErrorResponse.body(message)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        addCORS(&headers)
        if status == 401 { headers.add(name: "WWW-Authenticate", value: #"Bearer realm="gqlmuxd""#) }
        if close { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if close {
            // Half-close after the answer and keep reading (and ignoring) for a moment: closing
            // with unread input resets the connection, and the peer would lose the answer.
            closingConnection = true
            timer?.cancel()
            timer = nil
            let channel = context.channel
            done.whenComplete { _ in channel.close(mode: .output, promise: nil) }
            channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        } else {
            timeouts.responseEnded(at: Self.now(context.eventLoop))
            armTimer(context)
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        heartbeat?.cancel()
        heartbeat = nil
        timer?.cancel()
        timer = nil
        reservation.release()
        context.fireChannelInactive()
    }
}

/// First in an endpoint connection's pipeline while it speaks HTTP: tells the HTTP handler
/// that bytes arrived, so the header timeout starts at a request's first byte.
package final class HTTPActivity: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer

    private let http: EndpointHTTPHandler
    private var context: ChannelHandlerContext?

    package init(http: EndpointHTTPHandler) {
        self.http = http
        http.activity = self
    }

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    package func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        http.bytesArrived()
        context.fireChannelRead(data)
    }

    /// Writes `answer` (a whole HTTP response) straight to the socket, half-closes, and closes
    /// a moment later: for a peer whose request never reached the HTTP decoder's output.
    package func closeWithRawAnswer(_ answer: ByteBuffer) {
        guard let context else { return }
        let channel = context.channel
        context.writeAndFlush(NIOAny(answer)).whenComplete { _ in channel.close(mode: .output, promise: nil) }
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }
}

@available(*, unavailable)
extension HTTPActivity: Sendable {}

/// At the head of an HTTP stream carried over a restart, in place of NIO's HTTP codec: the
/// response's head and the chunked encoding it announced were sent by the process before, so
/// what follows is written as chunks of that body, and its end as the last chunk. Whatever the
/// client sends is not read (a stream's connection ends with it).
package final class ResumedChunkedResponse: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = ByteBuffer

    package init() {}

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head:
            promise?.succeed()  // sent before the restart
        case .body(.byteBuffer(let bytes)):
            guard bytes.readableBytes > 0 else {
                // Not a chunk (an empty one would end the body), but written, so its promise
                // completes after what was written before it.
                context.write(wrapOutboundOut(bytes), promise: promise)
                return
            }
            var chunk = context.channel.allocator.buffer(capacity: NextFraming.chunkHeaderRoom + bytes.readableBytes + 2)
            chunk.writeRepeatingByte(0, count: NextFraming.chunkHeaderRoom)
            chunk.writeImmutableBuffer(bytes)
            NextFraming.sealChunk(&chunk)
            context.write(wrapOutboundOut(chunk), promise: promise)
        case .body(.fileRegion):
            promise?.fail(ChannelError.operationUnsupported)
        case .end:
            context.write(wrapOutboundOut(ByteBuffer(string: "0\r\n\r\n")), promise: promise)
        }
    }
}

@available(*, unavailable)
extension ResumedChunkedResponse: Sendable {}

/// Carried over a restart while it streams a subscription (SSE or multipart), its session
/// added and nothing half-read; any other exchange is closed instead.
extension EndpointHTTPHandler: CarriedConnection {
    package var carriage: HandoverState.Carriage? {
        guard let exchange, !exchange.ended, exchange.mode == .sse || exchange.mode == .multipart, session != nil, head == nil,
            !closingConnection, !handedOver
        else { return nil }
        return .init(exchange.mode == .sse ? .sse : .multipart)
    }

    package func handOver() {
        handedOver = true
        heartbeat?.cancel()
        heartbeat = nil
        timer?.cancel()
        timer = nil
    }
}
