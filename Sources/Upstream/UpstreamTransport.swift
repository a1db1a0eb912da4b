import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import UpstreamFrames

import struct FoundationEssentials.UUID

#if canImport(Glibc)
import Glibc
#endif

/// The graphql-transport-ws client on SwiftNIO: one upstream connection at a time,
/// reconnected on its own, driven by ``TransportStateMachine``.
///
/// All state is confined to ``eventLoop``. Methods whose name ends in `OnLoop` must be
/// called there (the daemon's hot path lives on the same loop); the others hop.
/// `@unchecked Sendable` — safe because of that: the `OnLoop` methods precondition the loop,
/// and the ``UpstreamFrameSink`` calls (from a connection's handler, on this loop) assert it.
package final class UpstreamTransport: UpstreamFrameSink, @unchecked Sendable {
    package let eventLoop: any EventLoop
    private var configuration: UpstreamConfiguration
    private var sslContext: NIOSSLContext?
    private let payloads: ConnectingPayloadSource
    private var machine: TransportStateMachine
    /// The subprotocols the next upgrade offers (`auto` drops one a server refused).
    private var offer: ProtocolOffer
    private var channels: [Int: any Channel] = [:]
    /// Connections we closed, waiting for the peer's close frame (see ``CloseHandshake``).
    private var closingChannels: [Int: any Channel] = [:]
    private var closeHandshake = CloseHandshake(timeout: .seconds(1))
    /// Generations whose connect (payload read, then TCP, TLS, upgrade) is in flight and still wanted.
    private var pendingConnects: Set<Int> = []
    /// Where every operation's updates go (the fan-out).
    /// Set by its owner before the first open: while the daemon is being built (nothing
    /// runs on the loop yet) or on the loop; read on the loop only.
    package var updates: OperationSink = { _, _ in }
    /// Told when a read of the connection's socket was all told to ``updates``: the fan-out
    /// writes a lone result then, not at the end of the loop's turn. Set like `updates`.
    package var readEnded: ReadEndSink = {}
    private var timer = DeadlineTimer()
    /// Transport events (connected, reconnected, disconnected, ping, pong, state). Set at
    /// init or by its owner on the loop, like `updates`; read on the loop only.
    package var observer: UpstreamEventObserver
    /// Opens one connection with the frame handler in its pipeline.
    private let connector: Connector
    /// The machine's clock.
    private let clock: @Sendable () -> Instant

    /// Opens one connection (TCP, TLS, the upgrade) and installs the frame handler it is given;
    /// the future succeeds once frames can flow. Tests stand in an embedded channel.
    package typealias Connector =
        @Sendable (
            _ configuration: UpstreamConfiguration, _ sslContext: NIOSSLContext?, _ eventLoop: any EventLoop,
            _ frameHandler: @escaping @Sendable () -> any ChannelHandler
        ) -> EventLoopFuture<WebSocketConnector.Opened>

    /// Production's connector: ``WebSocketConnector``.
    package static let webSocket: Connector = { configuration, sslContext, eventLoop, frameHandler in
        WebSocketConnector.connect(configuration: configuration, sslContext: sslContext, on: eventLoop, frameHandler: frameHandler)
    }

    /// Production's clock: the loop's monotonic time.
    package static let uptime: @Sendable () -> Instant = { Instant(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds)) }

    /// - Parameters:
    ///   - configuration: the endpoint, credentials and timings.
    ///   - sslContext: the TLS client context for a wss:// `url` (``PreparedUpstream``), built
    ///     off the loop because it reads CA files.
    ///   - payloads: reads `connecting_payload_file` off the loop; shared by a pool's connections.
    ///   - eventLoop: the loop that owns the transport and its connections.
    ///   - observer: transport events (connected, reconnected, disconnected, ping, pong, state).
    ///   - connector: opens connections (``webSocket``; tests: an embedded channel).
    ///   - clock: the machine's time (``uptime``; tests: an embedded loop's).
    package init(
        configuration: UpstreamConfiguration,
        sslContext: NIOSSLContext?,
        payloads: ConnectingPayloadSource,
        eventLoop: any EventLoop,
        observer: @escaping UpstreamEventObserver = { _ in },
        connector: @escaping Connector = UpstreamTransport.webSocket,
        clock: @escaping @Sendable () -> Instant = UpstreamTransport.uptime
    ) {
        self.connector = connector
        self.clock = clock
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.observer = observer
        self.sslContext = sslContext
        self.payloads = payloads
        self.offer = ProtocolOffer(configuration.protocols)
        self.machine = TransportStateMachine(
            options: configuration.transport,
            random: { Double.random(in: 0..<1) },
            makeUUID: { UUID().uuidString.lowercased() }
        )
    }

    /// Builds the TLS context here (blocking: call it off the event loop).
    /// - Throws: if the TLS configuration cannot be loaded (e.g. an unreadable `tls.ca_file`).
    package convenience init(
        configuration: UpstreamConfiguration,
        eventLoop: any EventLoop,
        observer: @escaping UpstreamEventObserver = { _ in }
    ) throws {
        let prepared = try PreparedUpstream(configuration, checkPayloadFile: false)
        self.init(
            configuration: configuration,
            sslContext: prepared.websocketTLS,
            payloads: ConnectingPayloadSource(eventLoop: eventLoop),
            eventLoop: eventLoop,
            observer: observer
        )
    }

    private var now: Instant { clock() }

    // MARK: - Commands (any thread)

    package func start() { eventLoop.execute { self.perform(self.machine.start(now: self.now)) } }
    package func pause() { eventLoop.execute { self.perform(self.machine.pause(now: self.now)) } }
    package func resume() { eventLoop.execute { self.perform(self.machine.resume(now: self.now)) } }

    /// Opens operation `id`; its updates reach ``updates``, on the event loop.
    /// - Returns: its id on the wire.
    package func open(_ id: OperationID, kind: OperationKind, payload: ByteBuffer) -> EventLoopFuture<String> {
        eventLoop.submit {
            self.openOnLoop(id, kind: kind, payload: payload)
            return self.machine.wireID(of: id) ?? id.description
        }
    }

    package func complete(_ id: OperationID) { eventLoop.execute { self.cancelOnLoop(id) } }

    /// Applies new credentials (headers, connecting payload); reconnects at once when
    /// `reconnectIfConnected` is set, keeping every subscription. The TLS context is built on
    /// a thread pool, then applied on the loop.
    package func update(_ change: @escaping @Sendable (inout UpstreamConfiguration) -> Void) -> EventLoopFuture<Void> {
        eventLoop.submit { self.configuration }
            .flatMap { current in
                NIOThreadPool.singleton.runIfActive(eventLoop: self.eventLoop) { () throws -> PreparedUpstream in
                    var updated = current
                    change(&updated)
                    return try PreparedUpstream(updated, checkPayloadFile: false)
                }
            }
            .map { prepared in self.applyOnLoop(prepared.configuration, sslContext: prepared.websocketTLS) }
    }

    /// Applies a configuration whose TLS context is already built; cannot fail. Reconnects at
    /// once when `reconnectIfConnected` is set, keeping every subscription.
    package func applyOnLoop(_ configuration: UpstreamConfiguration, sslContext: NIOSSLContext?) {
        eventLoop.preconditionInEventLoop()
        self.sslContext = sslContext
        self.configuration = configuration
        offer.configure(configuration.protocols)
        machine.apply(configuration.transport)
        if configuration.reconnectIfConnected { perform(machine.reconnectNow(now: self.now)) }
    }

    /// The configuration in use, to derive a reloaded one from.
    package var configurationOnLoop: UpstreamConfiguration {
        eventLoop.preconditionInEventLoop()
        return configuration
    }

    /// Completes every operation upstream, closes with 1000 and stops for good.
    package func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.perform(self.machine.shutdown(now: self.now))
            // Done when every socket is closed: the one just closed waits for the server's
            // close frame, at most the handshake's timeout.
            let closes = (Array(self.channels.values) + Array(self.closingChannels.values)).map { $0.closeFuture }
            return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
        }
    }

    package var connectionState: EventLoopFuture<ConnectionState> { eventLoop.submit { self.machine.connectionState } }

    /// True when nothing can happen without an outside event: no timer is due and no connect
    /// is in flight. Tests check it instead of sleeping to prove that no retry will come.
    package var isQuiet: EventLoopFuture<Bool> {
        eventLoop.submit { self.machine.nextDeadline == nil && self.pendingConnects.isEmpty }
    }

    /// Counters for the `status` verb.
    package var reconnectCount: Int {
        eventLoop.preconditionInEventLoop()
        return machine.reconnects
    }

    // MARK: - Commands on the loop

    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer) {
        eventLoop.preconditionInEventLoop()
        perform(machine.subscribe(id: id, kind: kind, payload: payload, now: self.now))
    }

    package func cancelOnLoop(_ id: OperationID) {
        eventLoop.preconditionInEventLoop()
        perform(machine.complete(id: id, now: self.now))
    }

    package var connectionStateOnLoop: ConnectionState {
        eventLoop.preconditionInEventLoop()
        return machine.connectionState
    }

    /// Live operations on this transport (subscriptions, and queries not yet answered): what a
    /// server's cap on operations per connection counts.
    package var operationCountOnLoop: Int {
        eventLoop.preconditionInEventLoop()
        return machine.operationCount
    }

    /// The subprotocol of the current (or last) connection, as the server selected it.
    package var protocolOnLoop: WireProtocol {
        eventLoop.preconditionInEventLoop()
        return machine.wire
    }

    // MARK: - Events from connections (on the loop)

    package func frameReceived(generation: Int, _ frame: ByteBuffer) {
        eventLoop.assertInEventLoop()
        perform(machine.received(generation: generation, frame, now: self.now))
    }

    /// Any generation's: a connection being left can only make the fan-out write sooner.
    package func readComplete(generation: Int) {
        eventLoop.assertInEventLoop()
        readEnded()
    }

    package func binaryReceived(generation: Int) {
        eventLoop.assertInEventLoop()
        perform(machine.protocolViolation(generation: generation, "binary frame on a text protocol", now: self.now))
    }

    package func protocolViolation(generation: Int, _ reason: String, code: CloseCode) {
        eventLoop.assertInEventLoop()
        perform(machine.protocolViolation(generation: generation, reason, closeCode: code, now: self.now))
    }

    package func activity(generation: Int) {
        eventLoop.assertInEventLoop()
        machine.activity(generation: generation, now: self.now)
    }

    package func pongReceived(generation: Int) {
        eventLoop.assertInEventLoop()
        perform(machine.pongFrame(generation: generation, now: self.now))
    }

    /// The peer's close frame arrived on `generation`: whether it answers ours (then only the
    /// socket is left to close) or starts the peer's own close.
    package func closeFrameReceived(generation: Int) -> CloseHandshake.PeerClose {
        eventLoop.assertInEventLoop()
        let ending = closeHandshake.peerClosed(generation: generation)
        if ending == .completesOurs { closingChannels[generation] = nil }
        rescheduleTimer()
        return ending
    }

    package func connectionClosed(generation: Int, code: CloseCode?, reason: String) {
        eventLoop.assertInEventLoop()
        channels[generation] = nil
        closingChannels[generation] = nil
        closeHandshake.socketClosed(generation: generation)
        if case .awaitingAck = machine.connectionState, generation == machine.generation,
            let next = offer.closedBeforeAck(wire: machine.wire, code: code)
        {
            observer(.protocolFallback(refused: machine.wire, next: next))
        }
        perform(machine.connectionClosed(generation: generation, code: code, reason: reason, now: self.now))
    }

    // MARK: - Performing actions

    private func perform(_ actions: [TransportAction]) {
        // A result, most messages: told at once, without the lists below.
        if actions.count == 1, case .operation(let id, let update) = actions[0] {
            updates(id, update)
            rescheduleTimer()
            return
        }
        var toFlush: [Int: any Channel] = [:]
        var updates: [(OperationID, OperationUpdate)] = []
        for action in actions {
            switch action {
            case .connect(let generation):
                connect(generation: generation)
            case .send(let generation, let bytes):
                guard let channel = channels[generation] else { continue }
                channel.write(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: bytes), promise: nil)
                toFlush[generation] = channel
            case .pingFrame(let generation):
                guard let channel = channels[generation] else { continue }
                channel.write(WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: channel.allocator.buffer(capacity: 0)), promise: nil)
                toFlush[generation] = channel
            case .close(let generation, let code, let reason):
                pendingConnects.remove(generation)
                guard let channel = channels.removeValue(forKey: generation) else { continue }
                toFlush[generation] = nil
                var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
                data.writeInteger(code.code)
                data.writeString(reason)
                let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data)
                // `closing`: the socket is closed when the peer's close frame answers, or at
                // the handshake's timeout (`rescheduleTimer`).
                channel.writeAndFlush(frame, promise: nil)
                closingChannels[generation] = channel
                closeHandshake.closeSent(generation: generation, now: self.now)
            case .abort(let generation):
                pendingConnects.remove(generation)
                channels.removeValue(forKey: generation)?.close(promise: nil)
                toFlush[generation] = nil
            case .event(let event):
                observer(event)
            case .operation(let id, let update):
                updates.append((id, update))
            }
        }
        // Frames reach the server before the operations' updates are told: after a reconnect,
        // 10,000 re-subscribes go out first, then 10,000 clients hear `active`.
        for channel in toFlush.values { channel.flush() }
        for (id, update) in updates { self.updates(id, update) }
        rescheduleTimer()
    }

    /// Reads the connecting payload (a file off the loop), then opens the connection.
    private func connect(generation: Int) {
        pendingConnects.insert(generation)
        if let appSync = configuration.appSync {
            // AppSync: the secret is read anew for every connect (a rotated key applies).
            payloads.readAppSync(appSync.auth).whenComplete { result in
                guard self.pendingConnects.contains(generation) else { return }
                switch result {
                case .success(let secret):
                    self.open(generation: generation, payload: nil, appSync: (appSync, secret))
                case .failure(let error):
                    self.pendingConnects.remove(generation)
                    self.perform(self.machine.connectionFailed(generation: generation, cause: "\(error)", now: self.now))
                }
            }
            return
        }
        switch configuration.connectingPayload {
        case .none:
            open(generation: generation, payload: nil)
        case .inline(let payload):
            open(generation: generation, payload: payload)
        case .file:
            payloads.read(configuration.connectingPayload).whenComplete { result in
                // Aborted meanwhile (connect timeout, pause, reload): a later attempt reads anew.
                guard self.pendingConnects.contains(generation) else { return }
                switch result {
                case .success(let payload):
                    self.open(generation: generation, payload: payload)
                case .failure(let error):
                    self.pendingConnects.remove(generation)
                    self.perform(self.machine.connectionFailed(generation: generation, cause: "\(error)", now: self.now))
                }
            }
        }
    }

    /// - Parameter appSync: AppSync's settings and the credentials read for this connection: the
    ///   connect's authorization goes in the URL's `header` parameter, and each `start` is
    ///   authorized (for IAM, signed) when it is sent.
    private func open(generation: Int, payload: ByteBuffer?, appSync: (settings: AppSyncSettings, secret: AppSyncSettings.Secret)? = nil) {
        var configuration = configuration
        configuration.protocols = offer.current
        var authorizer: AppSyncAuthorizer?
        if let (settings, secret) = appSync {
            let connect = settings.authorization(secret, path: "/graphql/connect", body: "{}", time: wallClockSeconds())
            configuration.url.target += (configuration.url.target.contains("?") ? "&" : "?") + AppSyncSettings.connectQuery(connect)
            authorizer = { data in AppSyncSettings.json(settings.authorization(secret, path: "/graphql", body: data, time: wallClockSeconds())) }
        }
        let authorization = authorizer
        let maxMessageBytes = configuration.maxMessageBytes
        let frameHandler: @Sendable () -> any ChannelHandler = {
            UpstreamFrameHandler(transport: self, generation: generation, maxMessageBytes: maxMessageBytes)
        }
        connector(configuration, sslContext, eventLoop, frameHandler).whenComplete { result in
            let wanted = self.pendingConnects.remove(generation) != nil
            switch result {
            case .success(let opened):
                guard wanted else {
                    opened.channel.close(promise: nil)
                    return
                }
                self.channels[generation] = opened.channel
                self.perform(
                    self.machine.connectionOpened(
                        generation: generation,
                        initPayload: payload,
                        protocol: opened.wire,
                        authorizer: authorization,
                        now: self.now
                    )
                )
            case .failure(let error):
                guard wanted else { return }
                if self.configuration.appSync != nil, let refused = error as? WebSocketConnector.UpgradeFailure, refused.status == 401 || refused.status == 403
                {
                    return self.perform(self.machine.connectionRefused(generation: generation, reason: refused.description))
                }
                self.perform(
                    self.machine.connectionFailed(generation: generation, cause: describe(connectTo: self.configuration.url.hostHeader, error), now: self.now)
                )
            }
        }
    }

    private func rescheduleTimer() {
        var deadline = machine.nextDeadlineInPlace()
        if let closing = closeHandshake.nextDeadline { deadline = deadline.map { min($0, closing) } ?? closing }
        guard timer.wouldChange(for: deadline) else { return }
        timer.set(deadline, on: eventLoop) {
            self.timer.fired()
            let now = self.now
            for generation in self.closeHandshake.expired(now: now) {
                self.closingChannels.removeValue(forKey: generation)?.close(promise: nil)  // the peer did not answer
            }
            self.perform(self.machine.tick(now: now))
        }
    }
}

/// Why a connect to `address` failed, naming the address once: a refused TCP connect already
/// names each address tried ("127.0.0.1:4000: Connection refused"); any other failure (TLS, the
/// upgrade, a timeout) gets `address` in front.
func describe(connectTo address: String, _ error: any Error) -> String {
    if error is NIOConnectionError || error is ProxyTunnelError { return describe(error) }
    return "\(address): \(describe(error))"
}

/// A short, operator-readable cause for a failed connect ("127.0.0.1:4000: Connection refused").
func describe(_ error: any Error) -> String {
    if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
    if let tls = error as? NIOSSLError { return "TLS: \(tls)" }
    if let connect = error as? NIOConnectionError {
        let causes = connect.connectionErrors.map { attempt -> String in
            let target = attempt.target.ipAddress.map { "\($0):\(attempt.target.port ?? 0)" } ?? "\(attempt.target)"
            return "\(target): \(describe(attempt.error))"
        }
        if causes.isEmpty { return connect.dnsAError.map { "DNS: \($0)" } ?? "connection failed" }
        return causes.joined(separator: "; ")
    }
    if let channel = error as? ChannelError, case .connectTimeout = channel { return "connect timeout" }
    return "\(error)"
}
