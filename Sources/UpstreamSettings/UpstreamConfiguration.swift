import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore

/// Everything the upstream transport needs, as values (the configuration reads and checks them
/// without any I/O module); every argument defaults except the URL.
package struct UpstreamConfiguration: Sendable {
    package enum ConnectingPayload: Sendable, Equatable {
        case none
        /// A JSON object sent as is.
        case inline(ByteBuffer)
        /// A file holding a JSON object, re-read on every connect so a rotated token needs no restart.
        case file(String)
    }

    package struct TLS: Sendable, Equatable {
        /// PEM bundle of extra trusted roots (a private CA); nil uses the system trust store.
        package var caFile: String?
        package var insecureSkipVerify: Bool
        package init(caFile: String? = nil, insecureSkipVerify: Bool = false) {
            self.caFile = caFile
            self.insecureSkipVerify = insecureSkipVerify
        }
    }

    package var url: UpstreamURL
    /// Extra upgrade request headers, e.g. Authorization.
    package var headers: [(name: String, value: String)]
    /// `[upstream.header_files]`: headers whose value is a file's one line (a secret kept out of
    /// gqlmuxd.toml). Read off the loop when the upstream is prepared (at start and at every
    /// reload) into ``headers`` (``PreparedUpstream``).
    package var headerFiles: [(name: String, path: String)] = []
    package var connectingPayload: ConnectingPayload
    package var clientName: String?
    package var clientVersion: String?
    package var tls: TLS
    package var maxMessageBytes: Int
    package var reconnectIfConnected: Bool
    package var transport: TransportOptions
    /// Subprotocols offered, in order of preference (`[upstream] protocol`; `auto` offers both,
    /// modern first); each connection speaks the one the server selects.
    package var protocols: [WireProtocol] = [.transportWS, .legacyWS]
    /// `[upstream] http_url`: queries and mutations go there as HTTP POST instead of the socket.
    package var httpURL: HTTPURL?
    /// `[upstream] http_timeout`: connect plus answer of one HTTP request.
    package var httpTimeout: Duration = .seconds(30)
    /// `[upstream] transport`: how subscriptions travel. For `multipart` and `sse` every
    /// operation goes to `httpURL` and `url` is not used.
    package var carrier: UpstreamCarrierKind = .websocket
    /// `[upstream] multipart_accept`: the Accept header of a multipart subscription request.
    package var multipartAccept = "multipart/mixed;subscriptionSpec=1.0, application/json"
    /// `[upstream] heartbeat_timeout`: no byte on a stream for this long and it is dead.
    package var heartbeatTimeout: Duration = .seconds(15)
    /// `[upstream] max_streams`: streams open at once.
    package var maxStreams = 256
    /// `[upstream] proxy`, or the `https_proxy`/`http_proxy`/`no_proxy` environment: the HTTP
    /// proxy every connection (WebSocket, HTTP operations, HTTP streams) is tunnelled through.
    package var proxy: ProxyChoice = .direct
    /// `[upstream.appsync]`, with `transport = "appsync"`: the credentials every connect,
    /// `start` and HTTP request carries.
    package var appSync: AppSyncSettings?

    package init(
        url: UpstreamURL,
        headers: [(name: String, value: String)] = [],
        connectingPayload: ConnectingPayload = .none,
        clientName: String? = nil,
        clientVersion: String? = nil,
        tls: TLS = TLS(),
        maxMessageBytes: Int = 16 << 20,
        reconnectIfConnected: Bool = true,
        transport: TransportOptions = TransportOptions()
    ) {
        self.url = url
        self.headers = headers
        self.connectingPayload = connectingPayload
        self.clientName = clientName
        self.clientVersion = clientVersion
        self.tls = tls
        self.maxMessageBytes = maxMessageBytes
        self.reconnectIfConnected = reconnectIfConnected
        self.transport = transport
    }

    /// Whether subscriptions travel as HTTP streams to `httpURL` (`transport` `multipart` or
    /// `sse`), each its own request, at most ``maxStreams`` at once.
    package var streamsOverHTTP: Bool { httpURL != nil && !carrier.usesWebSocket }

    /// All request headers of the upgrade, in order.
    package var upgradeHeaders: [(name: String, value: String)] {
        var all = headers
        if let clientName { all.append(("apollographql-client-name", clientName)) }
        if let clientVersion { all.append(("apollographql-client-version", clientVersion)) }
        return all
    }
}

/// `[upstream] transport`: what carries subscriptions upstream.
package enum UpstreamCarrierKind: String, Sendable, Equatable, CaseIterable {
    /// A WebSocket to `url` (graphql-transport-ws or graphql-ws).
    case websocket
    /// Apollo multipart subscriptions over HTTP to `http_url`.
    case multipart
    /// GraphQL over Server-Sent Events to `http_url`.
    case sse
    /// AWS AppSync: subscriptions over its real-time WebSocket (`url`, derived from `http_url`
    /// by default), queries and mutations as HTTP POSTs to `http_url`, both with the
    /// `[upstream.appsync]` credentials.
    case appsync

    /// Whether subscriptions travel over a WebSocket to `url`.
    package var usesWebSocket: Bool { self == .websocket || self == .appsync }
}

extension UpstreamConfiguration: Equatable {
    package static func == (a: UpstreamConfiguration, b: UpstreamConfiguration) -> Bool {
        a.url == b.url && a.headers.map { [$0.name, $0.value] } == b.headers.map { [$0.name, $0.value] }
            && a.headerFiles.map { [$0.name, $0.path] } == b.headerFiles.map { [$0.name, $0.path] }
            && a.connectingPayload == b.connectingPayload && a.clientName == b.clientName && a.clientVersion == b.clientVersion
            && a.tls == b.tls && a.maxMessageBytes == b.maxMessageBytes && a.reconnectIfConnected == b.reconnectIfConnected
            && a.transport == b.transport && a.protocols == b.protocols && a.httpURL == b.httpURL && a.httpTimeout == b.httpTimeout
            && a.carrier == b.carrier && a.multipartAccept == b.multipartAccept && a.heartbeatTimeout == b.heartbeatTimeout
            && a.maxStreams == b.maxStreams && a.proxy == b.proxy && a.appSync == b.appSync
    }

    /// Whether it reads a file at every connect or the reload rebuilds from one
    /// (`connecting_payload_file`, `header_files`, `tls.ca_file`, AppSync's secrets): a reload
    /// applies it anew even when no key changed, so a rotated file takes effect.
    package var readsFiles: Bool {
        if case .file = connectingPayload { return true }
        return tls.caFile != nil || appSync != nil || !headerFiles.isEmpty
    }
}
