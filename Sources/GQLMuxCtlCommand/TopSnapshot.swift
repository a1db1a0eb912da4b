import JSONEnvelope

/// One upstream as `top`'s header shows it, from `status`'s `upstreams` (docs/protocol.md).
struct UpstreamSummary: Equatable {
    var name: String
    var state = ""
    /// Upstream connections: the pool's, or for an identity upstream every identity's.
    var connections = 0
    /// Open HTTP streams (multipart and SSE upstreams); nil for a WebSocket upstream.
    var streams: Double?
    /// Seconds: the last keep-alive ping's round trip (for an upstream with identities, the
    /// longest of theirs).
    var pingRTT: Double?
    /// Seconds between the server's last two keep-alives (graphql-ws, AppSync), likewise.
    var keepAliveGap: Double?
    /// Seconds since the last message from it (with identities, the most recent of theirs).
    var lastMessageAge: Double?
    var reconnects: Double = 0

    init(name: String) { self.name = name }

    init(name: String, _ json: JSONValue) {
        self.name = name
        state = json["state"]?.stringValue ?? "?"
        streams = json["streams"]?.numberValue
        pingRTT = json["pingRTT"]?.numberValue
        keepAliveGap = json["keepAliveGap"]?.numberValue
        lastMessageAge = json["lastMessageAge"]?.numberValue
        if let identities = json["identities"]?.arrayValue {
            connections = identities.reduce(0) { $0 + Self.count($1["connections"]) }
            pingRTT = identities.compactMap { $0["pingRTT"]?.numberValue }.max() ?? pingRTT
            keepAliveGap = identities.compactMap { $0["keepAliveGap"]?.numberValue }.max() ?? keepAliveGap
            lastMessageAge = identities.compactMap { $0["lastMessageAge"]?.numberValue }.min() ?? lastMessageAge
        } else {
            connections = Self.count(json["connections"])
        }
        reconnects = json["reconnects"]?.numberValue ?? 0
    }

    /// A count given as an array's length or as a number.
    private static func count(_ value: JSONValue?) -> Int {
        if let array = value?.arrayValue { return array.count }
        return value?.numberValue.map { Int(clamping: Int64(max(0, min($0, 1e15)))) } ?? 0
    }
}

/// What one refresh of `top` read: `status`, `clients` and `operations`. Pure.
struct TopSnapshot: Equatable {
    var version = "?"
    var clientCount: Double = 0
    var localSubscriptions: Double = 0
    var upstreamSubscriptions: Double = 0
    var messagesIn: Double = 0
    var messagesOut: Double = 0
    var upstreams: [UpstreamSummary] = []
    var clients: [ClientRow] = []
    var operations: [OperationRow] = []

    init() {}

    /// The three answers as the daemon gave them (JSON text); nil if one is not what it should
    /// be (an object, then two arrays).
    init?(status: String, clients: String, operations: String) {
        guard let s = JSONValue.parse(status), s.isObject,
            let clientRows = JSONValue.parse(clients)?.arrayValue,
            let operationRows = JSONValue.parse(operations)?.arrayValue
        else { return nil }
        version = s["version"]?.stringValue ?? "?"
        clientCount = s["clients"]?.numberValue ?? Double(clientRows.count)
        localSubscriptions = s["subscriptions"]?["local"]?.numberValue ?? 0
        upstreamSubscriptions = s["subscriptions"]?["upstream"]?.numberValue ?? 0
        messagesIn = s["messages"]?["in"]?.numberValue ?? 0
        messagesOut = s["messages"]?["out"]?.numberValue ?? 0
        if case .object(let members)? = s["upstreams"] {
            upstreams = members.map { UpstreamSummary(name: $0.key, $0.value) }
        } else if let upstream = s["upstream"], upstream.isObject {
            upstreams = [UpstreamSummary(name: "default", upstream)]
        }
        self.clients = clientRows.map(ClientRow.init)
        self.operations = operationRows.map(OperationRow.init)
    }

    /// Results per second of upstream `name`: its operations' rates summed.
    func rate(of name: String) -> Double {
        operations.filter { $0.upstream == name }.reduce(0) { $0 + $1.rate }
    }

    /// The clients `filter` keeps (nil: every one).
    func clients(of filter: String?) -> [ClientRow] {
        guard let filter else { return clients }
        return clients.filter { $0.uses(filter) }
    }

    /// The operations `filter` keeps (nil: every one).
    func operations(of filter: String?) -> [OperationRow] {
        guard let filter else { return operations }
        return operations.filter { $0.upstream == filter }
    }
}
