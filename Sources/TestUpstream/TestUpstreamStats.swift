/// What the test upstream has seen, for assertions.
package struct TestUpstreamStats: Sendable, Equatable {
    /// WebSocket upgrades accepted.
    package var connections = 0
    package var openConnections = 0
    package var connectionInits = 0
    /// The raw `payload` of the last `connection_init` ("" when absent).
    package var lastInitPayload = ""
    /// Request headers of the last upgrade, names lower-cased.
    package var lastRequestHeaders: [String: String] = [:]
    /// Every `subscribe` message, whatever its operation type.
    package var subscribes = 0
    /// The raw `payload` of the last `subscribe`.
    package var lastSubscribePayload = ""
    package var subscriptionSubscribes = 0
    package var queries = 0
    package var mutations = 0
    package var activeSubscriptions = 0
    package var completesReceived = 0
    package var pingsReceived = 0
    /// Payloads of graphql-transport-ws `pong`s received ("" when absent).
    package var pongPayloads: [String] = []
    /// Payloads of WebSocket pong frames received.
    package var webSocketPongs: [String] = []
    /// Close codes sent by clients.
    package var clientCloseCodes: [UInt16] = []
}
