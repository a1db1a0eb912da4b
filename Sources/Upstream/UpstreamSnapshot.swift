import GQLMuxVocabulary

/// The upstream at one instant, as operators see it: the one value `status`, `STATUS=` and the
/// metrics read (``UpstreamCarriers/snapshotOnLoop``).
package struct UpstreamSnapshot: Sendable {
    /// One upstream connection: a pool member, or the HTTP streaming upstream (index 0).
    package struct Connection: Sendable, Equatable {
        package var index: Int
        package var state: ConnectionState
        /// Operations it carries (open streams, for the HTTP streaming upstream).
        package var operations: Int
        /// Its WebSocket subprotocol, or the stream flavour (`multipart`, `sse`).
        package var wire: String

        package init(index: Int, state: ConnectionState, operations: Int, wire: String) {
            self.index = index
            self.state = state
            self.operations = operations
            self.wire = wire
        }
    }

    /// The subscriptions' upstream in one word: connected when any connection is.
    package var state: ConnectionState
    /// `[upstream] transport`: `websocket`, `multipart` or `sse`.
    package var transport: String
    /// Where subscriptions go: `url`, or `http_url` for HTTP streams.
    package var url: String
    /// The first connection's subprotocol, or the stream flavour.
    package var wire: String
    package var connections: [Connection]
    /// `[upstream] http_url`, when set.
    package var httpURL: String?
    /// Outages ended (connections made again), over the daemon's life.
    package var reconnects: Int
    /// Open HTTP streams; nil over WebSocket.
    package var streams: Int?

    package init(
        state: ConnectionState,
        transport: String,
        url: String,
        wire: String,
        connections: [Connection],
        httpURL: String?,
        reconnects: Int,
        streams: Int?
    ) {
        self.state = state
        self.transport = transport
        self.url = url
        self.wire = wire
        self.connections = connections
        self.httpURL = httpURL
        self.reconnects = reconnects
        self.streams = streams
    }
}
