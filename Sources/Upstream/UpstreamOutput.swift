import GQLMuxVocabulary
import GraphQLTransportWS

/// Receives transport-level events, on the transport's event loop.
package typealias UpstreamEventObserver = @Sendable (TransportEvent) -> Void

/// Receives every operation's updates from a carrier, on its event loop, each named by the
/// ``OperationID`` it was opened with. The last update of an operation is always `.finished`
/// (none follows a cancel).
package typealias OperationSink = @Sendable (OperationID, OperationUpdate) -> Void

/// Told, on the carrier's event loop, when a read of an upstream connection was all told to
/// its ``OperationSink``: results that arrived together can be written on.
package typealias ReadEndSink = @Sendable () -> Void
