import GQLMuxVocabulary

/// Where one lane's new operations go, decided here only: its layout, the live operations on
/// each of its places, its pool connections, and what servers said of their connections' caps.
struct LanePlacer {
    /// Where new operations may go; setting it forgets what servers said of their caps.
    var layout: UpstreamLayout {
        didSet { refusedAbove = [:] }
    }
    /// Pool connections whose server refused one more subscription (AppSync's cap), with the
    /// number they hold at most: fewer than `layout` allows.
    private var refusedAbove: [Int: Int] = [:]
    /// Live operations per place, for the caps of `layout`.
    private var load: [Placement: Int] = [:]
    /// Pool connections that exist (the first always does): a new one is the next index.
    private var connections = 1

    init(layout: UpstreamLayout) { self.layout = layout }

    func load(on placement: Placement) -> Int { load[placement] ?? 0 }

    /// Operations live on this lane.
    var total: Int { load.values.reduce(0, +) }

    /// Where a new operation of `kind` goes: queries and mutations to `http_url` when it is set;
    /// subscriptions to a stream of their own when the upstream speaks HTTP streams (nil past
    /// `max_streams`), else to the first pool connection with room, or a new one while fewer
    /// than `max_connections` exist (nil: the pool is full). Counted there.
    mutating func place(_ kind: OperationKind) -> Placement? {
        guard let placement = choose(kind) else { return nil }
        load[placement, default: 0] += 1
        return placement
    }

    private mutating func choose(_ kind: OperationKind) -> Placement? {
        if kind != .subscription, layout.singlesOverHTTP { return .http }
        if case .streams(let max) = layout.subscriptions {
            // A stream carries subscriptions only; `http_url` (required with streams) takes the rest.
            return kind == .subscription && load(on: .stream) < max ? .stream : nil
        }
        let configured = layout.maxOperationsPerConnection
        guard configured > 0 || !refusedAbove.isEmpty else { return .connection(0) }
        let refused = refusedAbove
        if let index = (0..<connections).first(where: {
            load(on: .connection($0)) < Swift.min(configured > 0 ? configured : Int.max, refused[$0] ?? Int.max)
        }) {
            return .connection(index)
        }
        guard connections < layout.maxConnections else { return nil }
        connections += 1
        return .connection(connections - 1)
    }

    /// An operation left `placement`.
    mutating func remove(_ placement: Placement) {
        load[placement, default: 1] -= 1
        if load[placement] == 0 { load[placement] = nil }
    }

    /// The server of pool connection `index` refused one more operation: it holds no more than
    /// it does now, the refused one aside.
    mutating func refuse(above index: Int) {
        refusedAbove[index] = load(on: .connection(index)) - 1
    }

    mutating func removeAll() { load.removeAll() }
}
