/// The two GraphQL-over-WebSocket protocols the transport speaks. The state machine works in
/// one vocabulary (`ClientMessage`, `ServerMessage` in GraphQLTransportWS); only the words on the wire differ:
///
/// | meaning | graphql-transport-ws | graphql-ws (subscriptions-transport-ws) |
/// |---|---|---|
/// | run an operation | `subscribe` | `start` |
/// | a result | `next` | `data` |
/// | stop one (client) | `complete` | `stop` |
/// | liveness | client `ping` → `pong` | server `ka` (keep-alive), no client ping |
/// | init refused | close 4403 | `connection_error`, then a close |
/// | goodbye | close 1000 | `connection_terminate`, then close 1000 |
package enum WireProtocol: String, Sendable, Equatable, CaseIterable {
    case transportWS = "graphql-transport-ws"
    /// The legacy protocol of subscriptions-transport-ws (Apollo Server 2/3, Hasura, …).
    case legacyWS = "graphql-ws"

    /// The `Sec-WebSocket-Protocol` value.
    package var subprotocol: String { rawValue }

    /// Whether the client sends `ping`s (the legacy protocol relies on the server's `ka`).
    package var hasClientPing: Bool { self == .transportWS }
}
