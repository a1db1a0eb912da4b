import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOSSL

/// The upstream WebSocket connections to one endpoint: one by default; another, with the same
/// URL, headers and payload, when the multiplexer core places an operation on the next index
/// because every open one holds `max_operations_per_connection` (servers cap it: strawberry at
/// 100), up to `max_connections` (the core decides; see `Multiplexer.place`). Each is its own
/// ``UpstreamTransport`` (reconnects and re-subscribes on its own); extra ones are lazy and
/// close after `lazy_close_timeout` without operations. Pause, resume, reload and shutdown
/// apply to all. Lives on the daemon's event loop.
package final class ConnectionPool: SubscriptionUpstream {
    package typealias Observer = @Sendable (_ connection: Int, TransportEvent) -> Void

    package let eventLoop: any EventLoop
    package private(set) var members: [UpstreamTransport] = []
    private var configuration: UpstreamConfiguration
    /// The TLS context of `configuration`, built off the loop: a connection opened later on
    /// the loop reads no CA file.
    private var sslContext: NIOSSLContext?
    /// One payload file read at a time for all connections, off the loop.
    private let payloads: ConnectingPayloadSource
    /// Each connection's transport events, with its index (the daemon's journal and metrics).
    /// Set by its owner before start (or on the loop); every connection is told.
    package var observer: Observer = { _, _ in } {
        didSet { for (index, member) in members.enumerated() { member.observer = Self.observer(observer, index: index) } }
    }
    private var started = false
    private var paused = false

    package init(upstream: PreparedUpstream, eventLoop: any EventLoop) {
        self.configuration = upstream.configuration
        self.sslContext = upstream.websocketTLS
        self.payloads = ConnectingPayloadSource(eventLoop: eventLoop)
        self.eventLoop = eventLoop
        members.append(makeTransport(index: 0))
    }

    package var primary: UpstreamTransport { members[0] }

    /// Connection `index`'s configuration: the pool's, whole. An extra connection exists for
    /// operations that did not fit: it connects on its first one and closes after
    /// lazy_close_timeout once it has none.
    private static func settings(_ configuration: UpstreamConfiguration, index: Int) -> UpstreamConfiguration {
        var settings = configuration
        if index > 0 { settings.transport.lazy = true }
        return settings
    }

    private func makeTransport(index: Int) -> UpstreamTransport {
        let settings = Self.settings(configuration, index: index)
        return UpstreamTransport(
            configuration: settings,
            sslContext: sslContext,
            payloads: payloads,
            eventLoop: eventLoop,
            observer: Self.observer(observer, index: index)
        )
    }

    /// Connection `index`'s events, told to the pool's observer with its index. It captures
    /// the observer, not the pool, so a transport does not keep its pool alive.
    private static func observer(_ observer: @escaping Observer, index: Int) -> UpstreamEventObserver {
        { event in observer(index, event) }
    }

    /// Where every connection's operation updates go (the fan-out).
    package var updates: OperationSink = { _, _ in } {
        didSet { for member in members { member.updates = updates } }
    }

    /// Told when a read of any connection's socket was all told to ``updates``.
    package var readEnded: ReadEndSink = {} {
        didSet { for member in members { member.readEnded = readEnded } }
    }

    // MARK: - Connections by index

    /// Connection `index`, as the multiplexer core placed an operation on it: made (lazy,
    /// started, paused like the others) when first named. The core names a new index only
    /// while fewer than `max_connections` exist.
    package func connection(_ index: Int) -> UpstreamTransport {
        eventLoop.preconditionInEventLoop()
        while members.count <= index {
            let transport = makeTransport(index: members.count)
            transport.updates = updates
            transport.readEnded = readEnded
            members.append(transport)
            if started { transport.start() }
            if paused { transport.pause() }
        }
        return members[index]
    }

    // MARK: - Lifecycle of all

    package func start() {
        started = true
        for member in members { member.start() }
    }

    package func pause() {
        paused = true
        for member in members { member.pause() }
    }

    package func resume() {
        paused = false
        for member in members { member.resume() }
    }

    /// Replaces every connection's configuration whole with the reloaded one (and that of
    /// connections opened later), so all of them run the same settings. Its TLS context is
    /// already built, so this cannot fail halfway.
    package func applyOnLoop(_ upstream: PreparedUpstream) {
        eventLoop.preconditionInEventLoop()
        configuration = upstream.configuration
        sslContext = upstream.websocketTLS
        for (index, member) in members.enumerated() {
            member.applyOnLoop(Self.settings(configuration, index: index), sslContext: sslContext)
        }
    }

    package func shutdown() -> EventLoopFuture<Void> {
        EventLoopFuture.andAllComplete(members.map { $0.shutdown() }, on: eventLoop)
    }

    // MARK: - What operators see

    package var connectionsOnLoop: [UpstreamSnapshot.Connection] {
        members.enumerated().map { index, member in
            UpstreamSnapshot.Connection(
                index: index,
                state: member.connectionStateOnLoop,
                operations: member.operationCountOnLoop,
                wire: member.protocolOnLoop.rawValue
            )
        }
    }

    /// The pool's state in one word: connected when any connection is, else the first's.
    package var stateOnLoop: ConnectionState {
        members.contains { $0.connectionStateOnLoop == .connected } ? .connected : primary.connectionStateOnLoop
    }

    package var reconnectCountOnLoop: Int { members.reduce(0) { $0 + $1.reconnectCount } }
}
