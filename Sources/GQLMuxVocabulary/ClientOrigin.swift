/// Where a local client came in: which of gqlmuxd's listeners accepted it.
package enum ClientOrigin: String, Sendable, CaseIterable {
    /// The line socket: local protocol v1.
    case lineSocket = "line"
    /// The GraphQL endpoint's Unix socket (WebSocket or HTTP, translated in front of its session).
    case endpointSocket = "endpoint"
    /// The GraphQL endpoint's loopback TCP port: any user of the host (no peer credentials).
    case endpointTCP = "endpoint-tcp"
}
