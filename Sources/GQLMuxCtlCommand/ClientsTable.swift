import JSONEnvelope

/// One row of the daemon's `clients` answer (docs/protocol.md), read leniently: a member
/// missing or of another type reads as unknown (nil) or zero. Pure.
struct ClientRow: Equatable {
    var id: Double = 0
    var kind = ""
    var listener = ""
    var uid: Double?
    var pid: Double?
    var process: String?
    var name = ""
    /// Each upstream it uses and the identity there (`host` or a hashed tag).
    var upstreams: [UpstreamUse] = []
    var subscriptions: Double = 0
    var results: Double = 0
    var bytes: Double = 0
    var rate: Double = 0
    var queuedBytes: Double = 0
    var queuedPeakBytes: Double = 0
    var slowConsumerCuts: Double = 0
    /// Unix seconds.
    var connectedAt: Double?
    var restarts: Double = 0

    init() {}

    init(_ json: JSONValue) {
        id = json["id"]?.numberValue ?? 0
        kind = json["kind"]?.stringValue ?? ""
        listener = json["listener"]?.stringValue ?? ""
        uid = json["uid"]?.numberValue
        pid = json["pid"]?.numberValue
        process = json["process"]?.stringValue
        name = json["name"]?.stringValue ?? ""
        upstreams = (json["upstreams"]?.arrayValue ?? []).map {
            UpstreamUse(upstream: $0["upstream"]?.stringValue ?? "?", identity: $0["identity"]?.stringValue ?? "?")
        }
        subscriptions = json["subscriptions"]?.numberValue ?? 0
        results = json["results"]?.numberValue ?? 0
        bytes = json["bytes"]?.numberValue ?? 0
        rate = json["rate"]?.numberValue ?? 0
        queuedBytes = json["queuedBytes"]?.numberValue ?? 0
        queuedPeakBytes = json["queuedPeakBytes"]?.numberValue ?? 0
        slowConsumerCuts = json["slowConsumerCuts"]?.numberValue ?? 0
        connectedAt = json["connectedAt"]?.numberValue
        restarts = json["restarts"]?.numberValue ?? 0
    }

    struct UpstreamUse: Equatable {
        var upstream: String
        var identity: String
    }

    /// KIND as the table shows it: the WebSocket subprotocols shortened (`ws`, `ws-legacy`).
    var shownKind: String {
        switch kind {
        case "graphql-transport-ws": return "ws"
        case "graphql-ws": return "ws-legacy"
        default: return kind
        }
    }

    /// UPSTREAMS as the table shows it: `default`, `default,second`, `second:3f2a9c1b04d7`; `-` for none.
    var shownUpstreams: String {
        guard !upstreams.isEmpty else { return "-" }
        return upstreams.map { $0.identity == "host" ? $0.upstream : "\($0.upstream):\($0.identity)" }.joined(separator: ",")
    }

    /// The columns of `gqlmuxctl clients` and of `top`'s clients table, in their order.
    static let columns: [Column<ClientRow>] = [
        Column(header: "ID", numeric: true, priority: 3, cell: { r, _ in whole(r.id) }, sortKey: { .number($0.id) }),
        Column(header: "KIND", numeric: false, priority: 8, cell: { r, _ in r.shownKind }, sortKey: { .text($0.shownKind) }),
        Column(header: "LISTENER", numeric: false, priority: 15, cell: { r, _ in r.listener }, sortKey: { .text($0.listener) }),
        Column(header: "UID", numeric: true, priority: 11, cell: { r, _ in r.uid.map(whole) ?? "-" }, sortKey: { .number($0.uid ?? -1) }),
        Column(header: "PID", numeric: true, priority: 6, cell: { r, _ in r.pid.map(whole) ?? "-" }, sortKey: { .number($0.pid ?? -1) }),
        Column(
            header: "PROCESS",
            numeric: false,
            priority: 4,
            flexible: true,
            minWidth: 9,
            maxWidth: 16,
            cell: { r, _ in r.process ?? "-" },
            sortKey: { .text($0.process ?? "") }
        ),
        Column(
            header: "NAME",
            numeric: false,
            priority: 0,
            flexible: true,
            minWidth: 12,
            cell: { r, _ in r.name.isEmpty ? "-" : r.name },
            sortKey: { .text($0.name) }
        ),
        Column(
            header: "UPSTREAMS",
            numeric: false,
            priority: 13,
            flexible: true,
            minWidth: 9,
            cell: { r, _ in r.shownUpstreams },
            sortKey: { .text($0.shownUpstreams) }
        ),
        Column(header: "SUBS", numeric: true, priority: 5, cell: { r, _ in whole(r.subscriptions) }, sortKey: { .number($0.subscriptions) }),
        Column(header: "RESULTS", numeric: true, priority: 7, cell: { r, _ in HumanUnits.count(r.results) }, sortKey: { .number($0.results) }),
        Column(header: "RATE/S", numeric: true, priority: 2, cell: { r, _ in HumanUnits.rate(r.rate) }, sortKey: { .number($0.rate) }),
        Column(header: "BYTES", numeric: true, priority: 9, cell: { r, _ in HumanUnits.bytes(r.bytes) }, sortKey: { .number($0.bytes) }),
        Column(header: "QUEUED", numeric: true, priority: 1, cell: { r, _ in HumanUnits.bytes(r.queuedBytes) }, sortKey: { .number($0.queuedBytes) }),
        Column(header: "PEAK", numeric: true, priority: 10, cell: { r, _ in HumanUnits.bytes(r.queuedPeakBytes) }, sortKey: { .number($0.queuedPeakBytes) }),
        Column(header: "CUTS", numeric: true, priority: 14, cell: { r, _ in whole(r.slowConsumerCuts) }, sortKey: { .number($0.slowConsumerCuts) }),
        Column(
            header: "AGE",
            numeric: true,
            priority: 12,
            cell: { r, c in r.connectedAt.map { HumanUnits.age(c.now - $0) } ?? "-" },
            sortKey: { .number(-($0.connectedAt ?? .infinity)) }
        ),
        Column(header: "RESTARTS", numeric: true, priority: 16, cell: { r, _ in whole(r.restarts) }, sortKey: { .number($0.restarts) }),
    ]

    /// `top`'s first order: the most bytes queued first, so a slow client is on top.
    static let defaultOrder = SortOrder(column: columns.firstIndex { $0.header == "QUEUED" }!, descending: true)

    /// Whether it uses upstream `name`.
    func uses(_ name: String) -> Bool { upstreams.contains { $0.upstream == name } }
}

extension JSONValue {
    /// A number's value; nil for anything else (or a number a Double cannot read).
    var numberValue: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }
}

/// A whole number as digits (a fraction dropped), `-` for none that is finite.
func whole(_ value: Double) -> String {
    guard value.isFinite, value.magnitude < 1e18 else { return "-" }
    return String(Int64(value))
}
