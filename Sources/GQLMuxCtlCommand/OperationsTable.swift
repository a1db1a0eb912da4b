import JSONEnvelope

/// One row of the daemon's `operations` answer (docs/protocol.md), read leniently like
/// ``ClientRow``. Pure.
struct OperationRow: Equatable {
    var id = ""
    var upstream = ""
    var identity = ""
    var kind = ""
    var operation = ""
    var state = ""
    var subscribers: Double = 0
    var results: Double = 0
    var rate: Double = 0
    /// Seconds since its last result; nil before the first.
    var lastResultAge: Double?
    var outages: Double = 0
    var gapSeconds: Double = 0
    /// Unix seconds.
    var startedAt: Double?

    init() {}

    init(_ json: JSONValue) {
        id = json["id"]?.stringValue ?? json["id"]?.numberValue.map(whole) ?? ""
        upstream = json["upstream"]?.stringValue ?? ""
        identity = json["identity"]?.stringValue ?? ""
        kind = json["kind"]?.stringValue ?? ""
        operation = json["operation"]?.stringValue ?? ""
        state = json["state"]?.stringValue ?? ""
        subscribers = json["subscribers"]?.numberValue ?? 0
        results = json["results"]?.numberValue ?? 0
        rate = json["rate"]?.numberValue ?? 0
        lastResultAge = json["lastResultAge"]?.numberValue
        outages = json["outages"]?.numberValue ?? 0
        gapSeconds = json["gapSeconds"]?.numberValue ?? 0
        startedAt = json["startedAt"]?.numberValue
    }

    /// KIND as the table shows it: `sub`, `query`, `mutation`.
    var shownKind: String { kind == "subscription" ? "sub" : kind }

    /// The id's number when it is one (ids sort as numbers), else its text.
    var idKey: SortKey { Double(id).map { .number($0) } ?? .text(id) }

    /// The columns of `gqlmuxctl operations` and of `top`'s operations table, in their order.
    static let columns: [Column<OperationRow>] = [
        Column(header: "ID", numeric: true, priority: 6, maxWidth: 12, cell: { r, _ in r.id }, sortKey: { $0.idKey }),
        Column(header: "UPSTREAM", numeric: false, priority: 7, maxWidth: 20, cell: { r, _ in r.upstream }, sortKey: { .text($0.upstream) }),
        Column(header: "IDENTITY", numeric: false, priority: 11, maxWidth: 16, cell: { r, _ in r.identity }, sortKey: { .text($0.identity) }),
        Column(header: "KIND", numeric: false, priority: 10, cell: { r, _ in r.shownKind }, sortKey: { .text($0.shownKind) }),
        Column(
            header: "OPERATION",
            numeric: false,
            priority: 0,
            flexible: true,
            minWidth: 9,
            maxWidth: 48,
            cell: { r, _ in r.operation },
            sortKey: { .text($0.operation) }
        ),
        Column(header: "STATE", numeric: false, priority: 2, cell: { r, _ in r.state }, sortKey: { .text($0.state) }),
        Column(header: "SUBS", numeric: true, priority: 3, cell: { r, _ in whole(r.subscribers) }, sortKey: { .number($0.subscribers) }),
        Column(header: "RESULTS", numeric: true, priority: 5, cell: { r, _ in HumanUnits.count(r.results) }, sortKey: { .number($0.results) }),
        Column(header: "RATE/S", numeric: true, priority: 1, cell: { r, _ in HumanUnits.rate(r.rate) }, sortKey: { .number($0.rate) }),
        Column(
            header: "LAST",
            numeric: true,
            priority: 4,
            cell: { r, _ in r.lastResultAge.map(HumanUnits.seconds) ?? "-" },
            sortKey: { .number($0.lastResultAge ?? -1) }
        ),
        Column(header: "OUTAGES", numeric: true, priority: 8, cell: { r, _ in whole(r.outages) }, sortKey: { .number($0.outages) }),
        Column(header: "GAP", numeric: true, priority: 9, cell: { r, _ in HumanUnits.seconds(r.gapSeconds) }, sortKey: { .number($0.gapSeconds) }),
        Column(
            header: "AGE",
            numeric: true,
            priority: 12,
            cell: { r, c in r.startedAt.map { HumanUnits.age(c.now - $0) } ?? "-" },
            sortKey: { .number(-($0.startedAt ?? .infinity)) }
        ),
    ]

    /// `top`'s first order: the busiest first.
    static let defaultOrder = SortOrder(column: columns.firstIndex { $0.header == "RATE/S" }!, descending: true)
}
