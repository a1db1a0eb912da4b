/// Which table `top` shows.
enum TopTable: Equatable {
    case clients
    case operations
}

/// What `top` shows and how: the table, each table's order, the upstream filter. Keys change
/// it (``handle(_:upstreams:)``); it never does I/O. Pure.
struct TopState: Equatable {
    var table = TopTable.clients
    var clientOrder = ClientRow.defaultOrder
    var operationOrder = OperationRow.defaultOrder
    /// Only rows of this upstream; nil: every one.
    var upstream: String?

    /// What a key asks for.
    enum Action: Equatable {
        case quit
        /// The view changed: draw it again (no new data needed).
        case redraw
        case none
    }

    /// Applies one key. `upstreams`: the names `u` cycles through, in their order (the
    /// daemon's status lists `default` first).
    mutating func handle(_ key: TopKey, upstreams: [String]) -> Action {
        switch key {
        case .tab:
            table = table == .clients ? .operations : .clients
        case .left:
            moveSort(by: -1)
        case .right:
            moveSort(by: 1)
        case .other:
            return .none
        case .character(let c):
            switch c {
            case "q", "Q": return .quit
            case "c": table = .clients
            case "o": table = .operations
            case "s", "<", ",": moveSort(by: -1)
            case "S", ">", ".": moveSort(by: 1)
            case "r", "R":
                if table == .clients { clientOrder.descending.toggle() } else { operationOrder.descending.toggle() }
            case "u", "U": upstream = Self.next(after: upstream, in: upstreams)
            case "\u{0C}": break  // Ctrl-L: draw again.
            default: return .none
            }
        }
        return .redraw
    }

    /// The filter after `current`: all → each name in turn → all. A name no longer listed
    /// goes back to all.
    static func next(after current: String?, in names: [String]) -> String? {
        guard let current else { return names.first }
        guard let index = names.firstIndex(of: current), index + 1 < names.count else { return nil }
        return names[index + 1]
    }

    /// The sort column one step left or right (wrapping); each column starts in its own
    /// direction: numbers largest first, text A to Z.
    private mutating func moveSort(by step: Int) {
        switch table {
        case .clients: clientOrder = Self.moved(clientOrder, by: step, columns: ClientRow.columns)
        case .operations: operationOrder = Self.moved(operationOrder, by: step, columns: OperationRow.columns)
        }
    }

    static func moved<Row>(_ order: SortOrder, by step: Int, columns: [Column<Row>]) -> SortOrder {
        let count = columns.count
        let column = ((order.column + step) % count + count) % count
        return SortOrder(column: column, descending: columns[column].numeric)
    }
}
