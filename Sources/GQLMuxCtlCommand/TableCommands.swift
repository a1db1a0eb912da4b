import ArgumentParser
import GQLMuxClientCore
import JSONEnvelope

#if canImport(Glibc)
import Glibc
#endif

struct Clients: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the daemon's client connections: one row each (an admin sees every one, others their own uid's).",
        discussion: "With --json, one JSON object per line: the daemon's rows as they are (docs/protocol.md, `clients`)."
    )
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(), json: output.json) { client in
            let text = try await client.clients()
            try printTable(text, json: output.json, columns: ClientRow.columns, row: ClientRow.init)
        }
    }
}

struct Operations: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the upstream operations the daemon runs: one row each (an admin sees every one, others their own uid's).",
        discussion: "With --json, one JSON object per line: the daemon's rows as they are (docs/protocol.md, `operations`)."
    )
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(), json: output.json) { client in
            let text = try await client.operations()
            try printTable(text, json: output.json, columns: OperationRow.columns, row: OperationRow.init)
        }
    }
}

/// The daemon's rows (a JSON array, as text): with `json` one compact object per line as the
/// daemon wrote it, else a table at its natural widths, in the daemon's order.
func printTable<Row>(_ text: String, json: Bool, columns: [Column<Row>], row: (JSONValue) -> Row) throws {
    guard let rows = JSONValue.parse(text)?.arrayValue else {
        throw GQLMuxError(code: "BAD_REQUEST", message: "gqlmuxd's answer is not a JSON array")
    }
    if json {
        for object in rows { printLine(object.text) }
        return
    }
    let context = TableContext(now: unixNow(), unicode: Terminal.unicode)
    let table = TableLayout.render(rows.map(row), columns: columns, order: nil, width: nil, context: context)
    printLine(([table.header] + table.rows).joined(separator: "\n"))
}

/// The time now in unix seconds.
func unixNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Seconds on the monotonic clock.
func monotonicNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
