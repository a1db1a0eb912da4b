import GraphQLTransportWS
import NIOCore

/// The seam between the multiplexer and the upstreams that carry its operations: a pooled
/// WebSocket connection (``UpstreamTransport``), `http_url` (``HTTPOperations``), and any
/// later transport. The fan-out places an operation on one carrier and talks to it only through
/// this; adding a carrier touches no other. Called on the carrier's event loop.
package protocol OperationCarrier: AnyObject {
    /// Sends an operation; every update reaches `handler` on the loop, the last one
    /// `.finished`. Returns the carrier's own id of the operation.
    func openOnLoop(kind: OperationKind, payload: ByteBuffer, handler: @escaping OperationHandler) -> String
    /// The multiplexer no longer wants operation `id` (its last subscriber left).
    func cancelOnLoop(id: String)
    /// Its name in the journal's `subscribed` event (`GQLMUX_TRANSPORT=`).
    var carrierName: String { get }
}

extension UpstreamTransport: OperationCarrier {
    package func openOnLoop(kind: OperationKind, payload: ByteBuffer, handler: @escaping OperationHandler) -> String {
        subscribeOnLoop(kind: kind, payload: payload, handler: handler)
    }

    package func cancelOnLoop(id: String) { completeOnLoop(id: id) }

    package var carrierName: String { "websocket" }
}

extension HTTPOperations: OperationCarrier {
    package func openOnLoop(kind: OperationKind, payload: ByteBuffer, handler: @escaping OperationHandler) -> String {
        sendOnLoop(payload: payload, handler: handler)
    }

    package var carrierName: String { "http" }
}

extension HTTPStreamTransport: OperationCarrier {
    /// Subscriptions only: the fan-out sends queries and mutations to ``HTTPOperations``.
    package func openOnLoop(kind: OperationKind, payload: ByteBuffer, handler: @escaping OperationHandler) -> String {
        precondition(kind == .subscription, "an HTTP stream carries subscriptions only")
        return openStreamOnLoop(payload: payload, handler: handler)
    }

    package func cancelOnLoop(id: String) { cancelStreamOnLoop(id: id) }

    package var carrierName: String { flavor.name }
}
