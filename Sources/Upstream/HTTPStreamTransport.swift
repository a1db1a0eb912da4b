import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPFields
import HTTPStreaming
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Subscriptions over HTTP streams (`[upstream] transport = "multipart"` or `"sse"`): one
/// POST to `http_url` per distinct subscription, its response read as a stream, driven by
/// ``StreamMachine``. Each stream has a connection of its own (HTTP/1.1), up to
/// `max_streams`; over `https` to a server that offers `h2`, all of them share one HTTP/2
/// connection (``StreamChannels``).
///
/// Confined to ``eventLoop``; the `OnLoop` methods must be called there.
/// `@unchecked Sendable` — safe because of that: every `OnLoop` method preconditions the loop,
/// and the channel handlers call back on the same loop.
package final class HTTPStreamTransport: @unchecked Sendable {
    /// Which streaming protocol the server speaks.
    package enum Flavor: Sendable, Equatable {
        /// Apollo multipart subscriptions (subscriptionSpec 1.0), with this `Accept` header.
        case multipart(accept: String)
        /// GraphQL over Server-Sent Events, distinct connections mode.
        case sse

        package var name: String {
            switch self {
            case .multipart: "multipart"
            case .sse: "sse"
            }
        }
    }

    package struct Configuration: Sendable {
        package var url: HTTPURL
        package var headers: [(name: String, value: String)]
        package var flavor: Flavor
        package var options: StreamMachine.Options
        package var maxMessageBytes: Int
        package var maxStreams: Int
        package var reconnectIfConnected: Bool
        /// The proxy that tunnels connections to `url`, if any.
        package var proxy: HTTPProxy?

        package init(
            url: HTTPURL,
            headers: [(name: String, value: String)] = [],
            flavor: Flavor,
            options: StreamMachine.Options = .init(),
            maxMessageBytes: Int = 16 << 20,
            maxStreams: Int = 256,
            reconnectIfConnected: Bool = true,
            proxy: HTTPProxy? = nil
        ) {
            self.proxy = proxy
            self.url = url
            self.headers = headers
            self.flavor = flavor
            self.options = options
            self.maxMessageBytes = maxMessageBytes
            self.maxStreams = maxStreams
            self.reconnectIfConnected = reconnectIfConnected
        }
    }

    /// One request on the wire: its generation (the machine's), its channel once connected,
    /// and its reader once the response turned out to be a stream.
    private struct Live {
        var generation: Int
        var channel: (any Channel)?
        var reader: Reader?
    }

    private enum Reader {
        case multipart(MultipartParser)
        case sse(SSEParser)
    }

    package let eventLoop: any EventLoop
    private var configuration: Configuration
    private var sslContext: NIOSSLContext?
    private var machine: StreamMachine
    /// Where every stream's updates go (the fan-out).
    /// Set by its owner before the first open: while the daemon is being built (nothing
    /// runs on the loop yet) or on the loop; read on the loop only.
    package var updates: OperationSink = { _, _ in }
    private var live: [OperationID: Live] = [:]
    /// Its HTTP/2 connection, shared with ``HTTPOperations`` to the same URL.
    private(set) lazy var channels = StreamChannels(eventLoop: eventLoop)
    private var timer = DeadlineTimer()
    private let observer: UpstreamEventObserver
    private var started = false
    /// Outages ended: times the streams were connected again after a loss (a WebSocket
    /// transport counts the same way), over the transport's life.
    private var reconnectCount = 0

    package init(configuration: Configuration, sslContext: NIOSSLContext?, eventLoop: any EventLoop, observer: @escaping UpstreamEventObserver = { _ in }) {
        self.configuration = configuration
        self.sslContext = sslContext
        self.eventLoop = eventLoop
        self.observer = observer
        self.machine = StreamMachine(options: configuration.options)
    }

    private static var now: Instant { Instant(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds)) }

    // MARK: - Operations

    /// Opens a stream for subscription `id`; its updates reach ``updates`` on the loop.
    package func openStreamOnLoop(_ id: OperationID, payload: ByteBuffer) {
        eventLoop.preconditionInEventLoop()
        perform(machine.open(id: id, payload: payload, now: Self.now))
    }

    /// Drops stream `id`; no update of it follows.
    package func cancelStreamOnLoop(_ id: OperationID) {
        eventLoop.preconditionInEventLoop()
        perform(machine.cancel(id: id))
    }

    // MARK: - Lifecycle

    /// Nothing to connect before the first subscription: streams open with their operations.
    package func start() {
        eventLoop.execute {
            guard !self.started else { return }
            self.started = true
            self.observer(.stateChanged(self.machine.connectionState))
        }
    }

    package func pause() { eventLoop.execute { self.perform(self.machine.pause()) } }

    package func resume() { eventLoop.execute { self.perform(self.machine.resume(now: Self.now)) } }

    /// A reloaded configuration, its TLS context already built; cannot fail. With
    /// `reconnect_if_connected` every stream is requested again with the new headers.
    package func applyOnLoop(_ configuration: Configuration, sslContext: NIOSSLContext?) {
        eventLoop.preconditionInEventLoop()
        self.configuration = configuration
        self.sslContext = sslContext
        machine.apply(configuration.options)
        if configuration.reconnectIfConnected {
            channels.reset()
            perform(machine.reconnectNow(now: Self.now))
        }
    }

    package func shutdown() -> EventLoopFuture<Void> {
        eventLoop.submit {
            self.perform(self.machine.shutdown())
            self.timer.cancel()
        }
    }

    package var connectionStateOnLoop: ConnectionState {
        eventLoop.preconditionInEventLoop()
        return machine.connectionState
    }

    package var streamCountOnLoop: Int {
        eventLoop.preconditionInEventLoop()
        return machine.streamCount
    }

    package var flavor: Flavor { configuration.flavor }

    package var reconnectCountOnLoop: Int {
        eventLoop.preconditionInEventLoop()
        return reconnectCount
    }

    // MARK: - Actions

    private func perform(_ actions: [StreamMachine.Action]) {
        for action in actions {
            switch action {
            case .request(let id, let generation, let payload):
                request(id, generation: generation, payload: payload)
            case .abort(let id, let generation):
                if let request = live[id], request.generation == generation {
                    live[id] = nil
                    request.channel?.close(promise: nil)
                }
            case .update(let id, let update):
                if case .finished = update, let request = live.removeValue(forKey: id) { request.channel?.close(promise: nil) }
                updates(id, update)
            case .event(let event):
                if case .reconnected = event { reconnectCount += 1 }  // as a WebSocket counts: outages ended
                observer(event)
            }
        }
        rescheduleTimer()
    }

    private func request(_ id: OperationID, generation: Int, payload: ByteBuffer) {
        if let old = live[id] { old.channel?.close(promise: nil) }
        live[id] = Live(generation: generation)
        let configuration = self.configuration
        let url = configuration.url
        let maxBody = configuration.maxMessageBytes
        channels.open(
            url: url,
            proxy: configuration.proxy,
            sslContext: sslContext,
            connectTimeout: .nanoseconds(configuration.options.connectTimeout.nanoseconds)
        ) {
            StreamResponseHandler(
                maxAnswerBytes: maxBody,
                isStream: { status, contentType in (200..<300).contains(status) && Self.reader(configuration, contentType) != nil },
                report: { [weak self] event in self?.responseEvent(event, id: id, generation: generation) }
            )
        }
        .whenComplete { result in
            switch result {
            case .success(let channel):
                guard self.live[id]?.generation == generation else {
                    channel.close(promise: nil)
                    return
                }
                self.live[id]?.channel = channel
                Self.write(payload, configuration: configuration, to: channel)
            case .failure(let error):
                self.responseEvent(.failed(.network(describe(connectTo: url.hostHeader, error))), id: id, generation: generation)
            }
        }
    }

    private static func write(_ payload: ByteBuffer, configuration: Configuration, to channel: any Channel) {
        let accept: String
        switch configuration.flavor {
        case .multipart(let value): accept = value
        case .sse: accept = "text/event-stream"
        }
        StreamChannels.writePOST(payload, to: configuration.url, accept: accept, headers: configuration.headers, close: false, on: channel)
    }

    // MARK: - Responses

    private func responseEvent(_ event: StreamResponseHandler.Event, id: OperationID, generation: Int) {
        eventLoop.preconditionInEventLoop()
        guard live[id]?.generation == generation else { return }
        let now = Self.now
        switch event {
        case .head(_, _, let contentType):
            live[id]?.reader = Self.reader(configuration, contentType)
            perform(machine.received(.stream, id: id, generation: generation, now: now))
        case .answer(let status, let reason, let body):
            perform(machine.received(.answer(status: status, reason: reason, body: body), id: id, generation: generation, now: now))
        case .bytes(let bytes):
            machine.bytesArrived(id: id, generation: generation, now: now)
            read(bytes, id: id, generation: generation, now: now)
        case .ended:
            perform(machine.streamLost(id: id, generation: generation, cause: .network("the stream ended without its close"), now: now))
        case .failed(let cause):
            perform(machine.streamLost(id: id, generation: generation, cause: cause, now: now))
        }
    }

    /// The stream reader for a 2xx response of `contentType`; nil when it is not a stream.
    private static func reader(_ configuration: Configuration, _ contentType: String) -> Reader? {
        switch configuration.flavor {
        case .multipart:
            guard let boundary = MultipartParser.boundary(contentType: contentType) else { return nil }
            return .multipart(MultipartParser(boundary: boundary, maxPartBytes: configuration.maxMessageBytes))
        case .sse:
            let type = contentType.split(separator: ";").first.map { $0.trimming(" \t").lowercased() }
            return type == "text/event-stream" ? .sse(SSEParser(maxEventBytes: configuration.maxMessageBytes)) : nil
        }
    }

    /// Reads stream bytes into messages and hands each to the machine, in order.
    private func read(_ bytes: ByteBuffer, id: OperationID, generation: Int, now: Instant) {
        guard var reader = live[id]?.reader else { return }
        var messages: [StreamMessage] = []
        do throws(StreamParseError) {
            switch reader {
            case .multipart(var parser):
                for event in try parser.feed(bytes) {
                    switch event {
                    case .part(let part): messages.append(try StreamMessage.multipart(part))
                    case .end: messages.append(.completed)
                    }
                }
                reader = .multipart(parser)
            case .sse(var parser):
                for event in try parser.feed(bytes) { messages.append(try StreamMessage.sse(event)) }
                reader = .sse(parser)
            }
        } catch {
            // Garbage, invalid UTF-8 or an oversized part: this stream is dropped and requested
            // again; the messages read before it still count.
            for message in messages { perform(machine.message(message, id: id, generation: generation, now: now)) }
            perform(machine.streamLost(id: id, generation: generation, cause: .protocolViolation(error.description), now: now))
            return
        }
        live[id]?.reader = reader
        for message in messages { perform(machine.message(message, id: id, generation: generation, now: now)) }
    }

    private func rescheduleTimer() {
        timer.set(machine.nextDeadline, on: eventLoop) {
            self.timer.fired()
            let actions = self.machine.tick(now: Self.now)
            // A stream that went silent or got no answer: on a shared HTTP/2 connection the
            // connection itself may be dead, so its streams are requested on a new one.
            if self.channels.isHTTP2, actions.contains(where: { if case .abort = $0 { true } else { false } }) { self.channels.reset() }
            self.perform(actions)
        }
    }
}

/// Reads one streamed response: the head, then bytes as they come; a response that is not a
/// stream is collected whole (bounded) and given as an answer.
final class StreamResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    enum Event {
        case head(status: Int, reason: String, contentType: String)
        case answer(status: Int, reason: String, body: ByteBuffer)
        case bytes(ByteBuffer)
        /// The response ended without the stream's close.
        case ended
        case failed(DisconnectCause)
    }

    private let maxAnswerBytes: Int
    private let isStream: (_ status: Int, _ contentType: String) -> Bool
    private let report: (Event) -> Void
    private var streaming = false
    /// The head and body of a response that is not a stream, collected.
    private var answer: (status: Int, reason: String, body: ByteBuffer)?
    private var done = false

    init(maxAnswerBytes: Int, isStream: @escaping (Int, String) -> Bool, report: @escaping (Event) -> Void) {
        self.maxAnswerBytes = maxAnswerBytes
        self.isStream = isStream
        self.report = report
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            let contentType = head.headers.first(name: "content-type") ?? ""
            let status = Int(head.status.code)
            if isStream(status, contentType) {
                streaming = true
                report(.head(status: status, reason: head.status.reasonPhrase, contentType: contentType))
            } else {
                answer = (status, head.status.reasonPhrase, ByteBuffer())
            }
        case .body(var bytes):
            if streaming {
                report(.bytes(bytes))
            } else if answer != nil {
                answer?.body.writeBuffer(&bytes)
                if answer!.body.readableBytes > maxAnswerBytes {
                    finish(.failed(.protocolViolation("a response larger than max_message_bytes (\(maxAnswerBytes))")))
                    context.close(promise: nil)
                }
            }
        case .end:
            if streaming {
                finish(.ended)
            } else if let answer {
                finish(.answer(status: answer.status, reason: answer.reason, body: answer.body))
            }
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed(.network("connection closed before the response ended")))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failed(.network(describe(error))))
        context.close(promise: nil)
    }

    private func finish(_ event: Event) {
        guard !done else { return }
        done = true
        report(event)
    }
}
