import JSONEnvelope
import LocalProtocol
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

extension GQLMuxClient {
    /// Registers and sends an operation; returns its local id. On the loop.
    func start(_ operation: ClientOperation) -> String {
        eventLoop.assertInEventLoop()
        guard !closed else {
            operation.onFinish(GQLMuxError.clientClosed)
            return ""
        }
        if let payload = configuration.upstreamPayloadJSON, JSONValue.parse(payload)?.isObject != true {
            operation.onFinish(GQLMuxError.badRequest.with(message: "upstreamPayloadJSON is not a JSON object"))
            return ""
        }
        nextID += 1
        let id = String(nextID)
        operations[id] = operation
        if let channel {
            channel.writeAndFlush(operation.line(id: id), promise: nil)
        } else {
            connectIfNeeded()
        }
        return id
    }

    /// Stops one operation at the daemon and finishes it locally.
    func cancel(id: String) {
        eventLoop.assertInEventLoop()
        guard let operation = operations.removeValue(forKey: id) else { return }
        forgetPressure(id)
        channel?.writeAndFlush(LocalEncode.envelope(.complete, id: id), promise: nil)
        // A cancelled subscription just ends; a cancelled query or mutation throws.
        operation.onFinish(operation.kind == .subscription ? nil : CancellationError())
    }

    func connectIfNeeded() {
        eventLoop.assertInEventLoop()
        guard channel == nil, !connecting, !closed else { return }
        connecting = true
        let handler = ClientLineHandler(client: self)
        ClientBootstrap(group: eventLoop)
            // One socket read (≤ 64 KiB) per readable event: once a subscription's buffer is full
            // and reading stops, at most the read in progress and one more arrive (NIO's default
            // of 4 reads per event let ~180 KB more in, seen on a fresh machine).
            .channelOption(.maxMessagesPerRead, value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maxLineBytes: 64 << 20)))
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(unixDomainSocketPath: configuration.socketPath)
            .whenComplete { result in
                self.connecting = false
                switch result {
                case .success(let channel):
                    self.connected(channel)
                case .failure(let error):
                    self.connectFailed(error)
                }
            }
    }

    private func connected(_ channel: any Channel) {
        eventLoop.assertInEventLoop()
        guard !closed else {
            channel.close(promise: nil)
            return
        }
        self.channel = channel
        everConnected = true
        reconnectAttempt = 0
        pressuredOnConnection = fullOperations
        updateReading()
        var hello = JSONObjectWriter()
        hello.field("protocol", LocalProtocol.version)
        hello.field("client", configuration.clientName)
        if configuration.upstreamPayloadJSON != nil || !configuration.upstreamHeaders.isEmpty {
            hello.field("upstream") { upstream in
                if let payload = configuration.upstreamPayloadJSON { upstream.field("payload", json: ByteBuffer(string: payload)) }
                if !configuration.upstreamHeaders.isEmpty {
                    upstream.field("headers") { headers in
                        for (name, value) in configuration.upstreamHeaders.sorted(by: { $0.key < $1.key }) { headers.field(name, value) }
                    }
                }
            }
        }
        channel.write(LocalEncode.envelope(.connectionInit, payload: hello.finish()), promise: nil)
        for (id, operation) in Self.inOrder(operations) {
            channel.write(operation.line(id: id), promise: nil)
        }
        channel.flush()
    }

    private func connectFailed(_ error: any Error) {
        eventLoop.assertInEventLoop()
        guard everConnected, configuration.reconnect else {
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            let failure = GQLMuxError.daemonUnavailable.with(message: "cannot connect to \(configuration.socketPath): \(reason)")
            failAll(failure)
            return
        }
        scheduleReconnect()
    }

    private func scheduleReconnect() {
        guard !operations.isEmpty, !closed else { return }
        let base = Self.nanoseconds(configuration.reconnectDelay)
        let delay = min(Self.nanoseconds(configuration.maxReconnectDelay), base << min(reconnectAttempt, 20))
        reconnectAttempt += 1
        eventLoop.scheduleTask(in: .nanoseconds(delay)) { self.connectIfNeeded() }
    }

    /// Whole nanoseconds of `duration`, saturating (a delay never overflows).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }

    func failAll(_ error: any Error) {
        eventLoop.assertInEventLoop()
        let ops = operations
        operations.removeAll()
        fullOperations.removeAll()
        pressuredOnConnection.removeAll()
        for (_, operation) in Self.inOrder(ops) { operation.onFinish(error) }
    }

    /// The connection closed: subscriptions wait for the daemon, the rest fail.
    func disconnected(connectionError: GQLMuxError?) {
        eventLoop.assertInEventLoop()
        channel = nil
        guard !closed else { return }
        if let fatal = connectionError, fatal != .shuttingDown {
            failAll(fatal)
            return
        }
        // Dropped without a word while we held reads back: the daemon's SLOW_CONSUMER cut (its
        // error line was queued behind what we did not read). Those subscriptions end with it.
        let cut = connectionError == nil ? pressuredOnConnection : []
        pressuredOnConnection = []
        let keep = configuration.reconnect && everConnected
        for (id, operation) in Self.inOrder(operations) {
            if cut.contains(id) {
                operations[id] = nil
                forgetPressure(id)
                operation.onFinish(
                    GQLMuxError.slowConsumer.with(message: "gqlmuxd disconnected this client while this subscription's results were not being read fast enough")
                )
            } else if operation.kind == .subscription && keep {
                operation.onState(.reconnecting, nil)
            } else {
                operations[id] = nil
                operation.onFinish(GQLMuxError.connectionLost.with(message: "the connection to gqlmuxd was lost"))
            }
        }
        scheduleReconnect()
    }

    /// A subscription's buffer became full (true) or drained to half (false).
    func pressure(_ full: Bool, on id: String) {
        eventLoop.assertInEventLoop()
        guard operations[id] != nil else { return }
        if full {
            fullOperations.insert(id)
            if channel != nil { pressuredOnConnection.insert(id) }
        } else {
            fullOperations.remove(id)
        }
        updateReading()
    }

    func forgetPressure(_ id: String) {
        eventLoop.assertInEventLoop()
        guard fullOperations.remove(id) != nil else { return }
        updateReading()
    }

    /// Reads the socket only while no subscription's buffer is full.
    private func updateReading() {
        guard let channel else { return }
        let read = fullOperations.isEmpty
        guard let sync = channel.syncOptions, (try? sync.getOption(.autoRead)) != read else { return }
        try? sync.setOption(.autoRead, value: read)
        if read { channel.read() }
    }

    /// Operations in the order they were made (ids are sequential numbers).
    private static func inOrder(_ operations: [String: ClientOperation]) -> [(key: String, value: ClientOperation)] {
        operations.sorted { Int($0.key) ?? 0 < Int($1.key) ?? 0 }
    }

    /// One message from the daemon that names an operation.
    func received(_ envelope: Envelope) {
        eventLoop.assertInEventLoop()
        guard let id = envelope.id, let operation = operations[id] else { return }
        let payload = envelope.payload.map { String(buffer: $0) }
        switch LocalMessageType(rawValue: envelope.type) {
        case .next:
            if let payload { operation.onNext(GQLMuxResult(json: payload, replayed: envelope.replayed, snapshot: envelope.snapshot)) }
        case .state:
            if let state = envelope.state.flatMap(GQLMuxSubscriptionState.init(rawValue:)) {
                operation.onState(state, envelope.gapMs.map { .milliseconds($0) })
            }
        case .complete:
            operations[id] = nil
            forgetPressure(id)
            operation.onFinish(nil)
        case .error:
            let error = Self.decodeError(payload)
            if error == .shuttingDown, operation.kind == .subscription, configuration.reconnect {
                operation.onState(.reconnecting, nil)  // The daemon is restarting: re-subscribe later.
                return
            }
            operations[id] = nil
            forgetPressure(id)
            operation.onFinish(error)
        case .status, .ok, .metrics, .clients, .operations:
            operations[id] = nil
            operation.onNext(GQLMuxResult(json: payload ?? "{}"))
            operation.onFinish(nil)
        default:
            break
        }
    }

    /// The first GraphQL error of an `error` payload, with its `extensions.code`.
    static func decodeError(_ payload: String?) -> GQLMuxError {
        guard let payload, let first = JSONValue.parse(payload)?.arrayValue?.first else {
            return GQLMuxError.upstreamError.with(message: payload ?? "")
        }
        let message = first["message"]?.stringValue ?? ""
        let extensions = first["extensions"]
        let code = extensions?["code"]?.stringValue ?? GQLMuxError.upstreamError.code
        let closeCode: Int? =
            if case .number(let text) = extensions?["closeCode"] { Int(text) } else { nil }
        let limit: String? = if case .string(let name) = extensions?["limit"] { name } else { nil }
        return GQLMuxError(code: code, message: message, closeCode: closeCode, limit: limit)
    }
}

/// Feeds daemon lines to the client; remembers a connection-level error (one without id).
/// `@unchecked Sendable` — safe because NIO calls it only on the client's loop.
final class ClientLineHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let client: GQLMuxClient
    private var connectionError: GQLMuxError?

    init(client: GQLMuxClient) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let envelope = try? Envelope(unwrapInboundIn(data)) else { return }
        if envelope.type == LocalMessageType.error.rawValue, envelope.id == nil {
            connectionError = GQLMuxClient.decodeError(envelope.payload.map { String(buffer: $0) })
            return
        }
        client.received(envelope)
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.disconnected(connectionError: connectionError)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
