import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore

/// The seam between the multiplexer and the upstreams that carry its operations: a pooled
/// WebSocket connection (``UpstreamTransport``), `http_url` (``HTTPOperations``), an HTTP
/// stream (``HTTPStreamTransport``), and any later transport. The fan-out opens an operation on
/// the carrier the multiplexer core placed it on, under the core's ``OperationID``; the carrier
/// tells every update of it to its ``OperationSink`` under the same id. Adding a carrier
/// touches no other. Called on the carrier's event loop.
package protocol OperationCarrier: AnyObject {
    /// Sends operation `id`; its updates reach the sink, the last one `.finished`.
    func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer)
    /// The multiplexer no longer wants operation `id` (its last subscriber left).
    func cancelOnLoop(_ id: OperationID)
    /// Its name in the journal's `subscribed` event (`GQLMUX_TRANSPORT=`).
    var carrierName: String { get }
}

extension UpstreamTransport: OperationCarrier {
    package var carrierName: String { configurationOnLoop.carrier == .appsync ? "appsync" : "websocket" }
}

extension HTTPOperations: OperationCarrier {
    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer) {
        sendOnLoop(id, kind: kind, payload: payload)
    }

    package var carrierName: String { "http" }
}

extension HTTPStreamTransport: OperationCarrier {
    /// Subscriptions only: the core places queries and mutations on ``HTTPOperations``.
    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer) {
        precondition(kind == .subscription, "an HTTP stream carries subscriptions only")
        openStreamOnLoop(id, payload: payload)
    }

    package func cancelOnLoop(_ id: OperationID) { cancelStreamOnLoop(id) }

    package var carrierName: String { flavor.name }
}

/// The upstream that carries subscriptions, as the daemon drives its life: the pool of
/// WebSocket connections, or the HTTP streams. The daemon holds one and never asks which.
/// Commands hop to the loop; `OnLoop` members must be called there.
package protocol SubscriptionUpstream: AnyObject {
    func start()
    /// Closes the upstream and holds every subscription until ``resume()``.
    func pause()
    func resume()
    /// A reloaded configuration, its file I/O done off the loop (``PreparedUpstream``); it
    /// cannot fail.
    func applyOnLoop(_ upstream: PreparedUpstream)
    /// Ends every operation and closes; done when every socket is closed.
    func shutdown() -> EventLoopFuture<Void>
    /// Its state in one word, for STATUS, `status` and the metrics.
    var stateOnLoop: ConnectionState { get }
    /// Connections (or streams) lost and made again, over its life.
    var reconnectCountOnLoop: Int { get }
}

extension HTTPStreamTransport: SubscriptionUpstream {
    package func applyOnLoop(_ upstream: PreparedUpstream) {
        guard let settings = upstream.configuration.httpStreams else { return }
        applyOnLoop(settings, sslContext: upstream.streamTLS)
    }

    package var stateOnLoop: ConnectionState { connectionStateOnLoop }
}
