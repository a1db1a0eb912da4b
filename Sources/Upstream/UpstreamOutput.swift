import GraphQLTransportWS

/// Receives transport-level events, on the transport's event loop.
package typealias UpstreamEventObserver = @Sendable (TransportEvent) -> Void

/// Receives one operation's updates, on the transport's event loop. The last update is
/// always `.finished`.
package typealias OperationHandler = @Sendable (OperationUpdate) -> Void
