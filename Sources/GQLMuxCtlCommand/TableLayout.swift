/// What a table's rows are sorted by: a number or a text.
enum SortKey: Comparable {
    case number(Double)
    case text(String)

    static func < (a: SortKey, b: SortKey) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)): return x < y
        case (.text(let x), .text(let y)): return x < y
        case (.number, .text): return true
        case (.text, .number): return false
        }
    }
}

/// One column of an operator's table: its header, how a row reads in it and sorts by it, and
/// how it gives way on a narrow terminal.
struct Column<Row>: Sendable {
    var header: String
    /// Numbers are right-aligned (their header too), and sorted largest first.
    var numeric: Bool
    /// Which columns a narrow terminal keeps: the lowest first (the sort column always).
    var priority: Int
    /// A column of names: it starts at `minWidth` and takes the width that is left, up to its
    /// widest cell.
    var flexible = false
    var minWidth = 0
    /// The widest a cell is shown (longer ones end in `…`).
    var maxWidth = 40
    var cell: @Sendable (Row, TableContext) -> String
    var sortKey: @Sendable (Row) -> SortKey
}

/// What cells need besides their row: the time now (unix seconds, for ages) and the character set.
struct TableContext {
    var now: Double
    /// The terminal takes UTF-8: `▼`/`▲` and `…`, names as they are; else ASCII only.
    var unicode = true
}

/// A table's order: which column (an index into its columns) and which way.
struct SortOrder: Equatable {
    var column: Int
    var descending: Bool
}

/// A table laid out: its header line and one line per row, each at most the width asked for.
struct RenderedTable: Equatable {
    var header: String
    var rows: [String]
    /// Headers of the columns left out for want of width.
    var hidden: [String]
}

enum TableLayout {
    /// `rows` sorted by `order` (ties by their position in `rows`, so the daemon's order holds).
    static func sorted<Row>(_ rows: [Row], columns: [Column<Row>], by order: SortOrder) -> [Row] {
        guard columns.indices.contains(order.column) else { return rows }
        let key = columns[order.column].sortKey
        return rows.enumerated().map { (key: key($0.element), index: $0.offset, row: $0.element) }
            .sorted { a, b in
                if a.key != b.key { return order.descending ? b.key < a.key : a.key < b.key }
                return a.index < b.index
            }
            .map(\.row)
    }

    /// The header with its sort mark: `▼RATE/S` (descending) or `▲RATE/S`; `*RATE/S` without unicode.
    static func header<Row>(_ column: Column<Row>, order: SortOrder?, index: Int, unicode: Bool) -> String {
        guard let order, order.column == index else { return column.header }
        return (unicode ? (order.descending ? "▼" : "▲") : "*") + column.header
    }

    /// Lays `rows` out in `columns` (already sorted). `width` nil: every column, each as wide as
    /// its widest cell (up to its `maxWidth`). With a width, the columns that fit, by priority
    /// (`order`'s column first), names widened into what is left; every line at most `width`.
    static func render<Row>(
        _ rows: [Row],
        columns: [Column<Row>],
        order: SortOrder?,
        width: Int?,
        context: TableContext
    ) -> RenderedTable {
        let headers = columns.indices.map { header(columns[$0], order: order, index: $0, unicode: context.unicode) }
        let cells = rows.map { row in columns.map { TextCell.sanitized($0.cell(row, context), unicode: context.unicode) } }
        // Each column's widest: its header, or its widest cell up to maxWidth.
        let natural = columns.indices.map { i in
            max(TextCell.width(headers[i]), min(columns[i].maxWidth, cells.map { TextCell.width($0[i]) }.max() ?? 0))
        }
        var widths = natural
        var shown = Set(columns.indices)
        if let width {
            var base = natural
            for i in columns.indices where columns[i].flexible {
                base[i] = min(natural[i], max(TextCell.width(headers[i]), columns[i].minWidth))
            }
            let byPriority = columns.indices.sorted { a, b in
                if let order, a == order.column || b == order.column { return a == order.column && b != order.column }
                return (columns[a].priority, a) < (columns[b].priority, b)
            }
            shown = []
            var used = 0
            for i in byPriority {
                let need = base[i] + (shown.isEmpty ? 0 : 1)
                if used + need <= width {
                    shown.insert(i)
                    used += need
                }
            }
            widths = base
            // What is left goes to the shown names, a column at a time, up to their widest.
            var left = width - used
            var growing = byPriority.filter { shown.contains($0) && columns[$0].flexible && widths[$0] < natural[$0] }
            while left > 0, !growing.isEmpty {
                for i in growing where left > 0 {
                    widths[i] += 1
                    left -= 1
                }
                growing.removeAll { widths[$0] >= natural[$0] }
            }
        }
        let order = columns.indices.filter(shown.contains)
        func line(_ texts: [String]) -> String {
            let joined = order.map { i in
                TextCell.fitted(texts[i], to: widths[i], right: columns[i].numeric, unicode: context.unicode)
            }.joined(separator: " ")
            let trimmed = String(joined.reversed().drop { $0 == " " }.reversed())
            return width.map { TextCell.truncated(trimmed, to: $0, unicode: context.unicode) } ?? trimmed
        }
        return RenderedTable(
            header: line(headers),
            rows: cells.map(line),
            hidden: columns.indices.filter { !shown.contains($0) }.map { columns[$0].header }
        )
    }
}
