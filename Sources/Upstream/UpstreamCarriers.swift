import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore

/// The one owner of everything that talks to the server: the pool of WebSocket connections,
/// the HTTP streams (`transport = "multipart"` or `"sse"`) and `http_url`'s queries and
/// mutations. The daemon drives it through one small surface (open and cancel an operation
/// where the multiplexer core placed it, start, pause, resume, apply a prepared configuration,
/// shut down) and reads it through one value, ``snapshotOnLoop``, that `status`, `STATUS=` and
/// the metrics all read. Which carriers exist, how they share connections (HTTP/2 requests ride
/// the stream connection) and how a reload replaces them is decided here alone.
///
/// Lives on one event loop: every member must be called there, except ``start()``,
/// ``pause()`` and ``resume()``, which the carriers hop with themselves.
package final class UpstreamCarriers {
    /// A carrier's transport event, with the index of the pool connection it concerns (0 for
    /// the HTTP streams).
    package typealias Observer = @Sendable (_ connection: Int, TransportEvent) -> Void

    package let eventLoop: any EventLoop
    private let pool: ConnectionPool
    /// Subscriptions' carrier when `transport` is `multipart` or `sse` (the pool then carries
    /// nothing). Chosen at start; a reload cannot change the transport.
    private let streams: HTTPStreamTransport?
    /// Queries and mutations when `http_url` is set; a reload may set, change or unset it.
    private var http: HTTPOperations?
    private var configuration: UpstreamConfiguration
    /// Where every carrier tells its operations' updates, each named by its ``OperationID``.
    private let updates: OperationSink
    /// The carriers are made before their observer is known (it is the daemon, which is being
    /// made too): they tell this box, and it tells whoever is set. A lock, not loop
    /// confinement: the daemon sets it from its initializer, off the loop; transport events
    /// are rare, so the lock costs nothing that matters.
    private let events = NIOLockedValueBox<Observer>({ _, _ in })

    /// Every carrier's transport events (the daemon's journal and metrics).
    package var observer: Observer {
        get { events.withLockedValue { $0 } }
        set { events.withLockedValue { $0 = newValue } }
    }

    /// - Parameters:
    ///   - upstream: the configuration with its TLS contexts built.
    ///   - updates: every operation's updates, from whichever carrier holds it.
    ///   - readEnded: told when a read of a WebSocket connection's socket was all told to
    ///     `updates` (the HTTP carriers' results wait for the end of the loop's turn).
    package init(_ upstream: PreparedUpstream, eventLoop: any EventLoop, readEnded: @escaping ReadEndSink = {}, updates: @escaping OperationSink) {
        self.eventLoop = eventLoop
        self.configuration = upstream.configuration
        self.updates = updates
        let events = self.events
        pool = ConnectionPool(upstream: upstream, eventLoop: eventLoop)
        pool.observer = { connection, event in events.withLockedValue { $0 }(connection, event) }
        pool.updates = updates
        pool.readEnded = readEnded
        streams = upstream.configuration.httpStreams.map { settings in
            let streams = HTTPStreamTransport(configuration: settings, sslContext: upstream.streamTLS, eventLoop: eventLoop) { event in
                events.withLockedValue { $0 }(0, event)
            }
            streams.updates = updates
            return streams
        }
        http = Self.makeHTTP(upstream, eventLoop: eventLoop, updates: updates, sharingWith: streams)
    }

    /// `http_url`'s carrier; with HTTP streams to the same `http_url`, requests ride their
    /// HTTP/2 connection when the server offers it.
    private static func makeHTTP(
        _ upstream: PreparedUpstream,
        eventLoop: any EventLoop,
        updates: @escaping OperationSink,
        sharingWith streams: HTTPStreamTransport?
    ) -> HTTPOperations? {
        guard let settings = upstream.configuration.httpOperations else { return nil }
        let http = HTTPOperations(configuration: settings, sslContext: upstream.httpTLS, eventLoop: eventLoop, sharingWith: streams)
        http.updates = updates
        return http
    }

    /// How long an idle identity's connections stay open (`lazy_close_timeout`).
    package var lazyCloseTimeout: Duration { configuration.transport.lazyCloseTimeout }

    /// What carries subscriptions.
    private var subscriptions: any SubscriptionUpstream { streams ?? pool }

    // MARK: - Operations

    /// Sends operation `id` on the carrier the multiplexer core placed it on; false when there
    /// is none (the layout follows the same configuration, so only a bug gets false).
    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement) -> Bool {
        guard let carrier = carrier(at: placement) else { return false }
        carrier.openOnLoop(id, kind: kind, payload: payload)
        return true
    }

    /// The multiplexer no longer wants operation `id`.
    package func cancelOnLoop(_ id: OperationID, on placement: Placement) {
        carrier(at: placement)?.cancelOnLoop(id)
    }

    /// The carrier's name for the journal's `subscribed` event (`GQLMUX_TRANSPORT=`).
    package func carrierName(at placement: Placement) -> String? {
        carrier(at: placement)?.carrierName
    }

    /// The carrier behind a placement; a pool connection is made when first named.
    private func carrier(at placement: Placement) -> (any OperationCarrier)? {
        eventLoop.assertInEventLoop()
        switch placement {
        case .connection(let index): return pool.connection(index)
        case .http: return http
        case .stream: return streams
        }
    }

    // MARK: - Life

    package func start() { subscriptions.start() }

    /// Closes the subscriptions' upstream and holds every subscription until ``resume()``.
    package func pause() { subscriptions.pause() }

    package func resume() { subscriptions.resume() }

    /// A reload, its file I/O done: every carrier takes the new settings; `http_url` set,
    /// changed or unset makes, updates or drops its carrier (requests in flight finish).
    /// Cannot fail.
    package func applyOnLoop(_ upstream: PreparedUpstream) {
        eventLoop.assertInEventLoop()
        configuration = upstream.configuration
        if let settings = upstream.configuration.httpOperations, let http {
            http.applyOnLoop(settings, sslContext: upstream.httpTLS)
        } else {
            http = Self.makeHTTP(upstream, eventLoop: eventLoop, updates: updates, sharingWith: streams)
        }
        subscriptions.applyOnLoop(upstream)
    }

    /// Ends every operation (requests in flight are cancelled, subscriptions completed
    /// upstream) and closes every connection; done when every socket is closed.
    package func shutdownOnLoop() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        http?.shutdownOnLoop()
        return subscriptions.shutdown()
    }

    // MARK: - What operators see

    /// The upstream as `status`, `STATUS=` and the metrics show it.
    package var snapshotOnLoop: UpstreamSnapshot {
        eventLoop.assertInEventLoop()
        let state = subscriptions.stateOnLoop
        if let streams, let url = configuration.httpURL {
            let name = streams.flavor.name
            return UpstreamSnapshot(
                state: state,
                transport: name,
                url: url.description,
                wire: name,
                connections: [.init(index: 0, state: streams.connectionStateOnLoop, operations: streams.streamCountOnLoop, wire: name)],
                httpURL: url.description,
                reconnects: streams.reconnectCountOnLoop,
                streams: streams.streamCountOnLoop
            )
        }
        return UpstreamSnapshot(
            state: state,
            transport: configuration.carrier.rawValue,  // websocket, or appsync
            url: configuration.url.description,
            wire: pool.primary.protocolOnLoop.rawValue,
            connections: pool.connectionsOnLoop,
            httpURL: configuration.httpURL?.description,
            reconnects: pool.reconnectCountOnLoop,
            streams: nil
        )
    }

    /// The subscriptions' upstream state alone (each client's `connection_ack`), cheaper than
    /// a whole snapshot.
    package var stateOnLoop: ConnectionState { subscriptions.stateOnLoop }

    /// What one carrier's event is logged with: the subprotocol (or stream flavour) of pool
    /// connection `connection`, its reconnects, and the subscriptions' endpoint.
    package func eventContextOnLoop(connection: Int) -> (url: String, wire: String, reconnects: Int) {
        if let streams, let url = configuration.httpURL {
            return (url.description, streams.flavor.name, streams.reconnectCountOnLoop)
        }
        let member = pool.members[connection]
        return (configuration.url.description, member.protocolOnLoop.rawValue, member.reconnectCount)
    }
}
