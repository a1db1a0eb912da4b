import ArgumentParser
import Foundation
import GQLMuxClient
import LocalProtocol

/// Exit codes a shell script can rely on (sysexits.h where one fits).
enum ExitStatus {
    /// The operation failed: a GraphQL error, or a daemon error for it.
    static let operationFailed: Int32 = 1
    /// gqlmuxd could not be reached (EX_UNAVAILABLE).
    static let unavailable: Int32 = 69
    /// The daemon refused this user or verb (EX_NOPERM).
    static let forbidden: Int32 = 77
}

@main
enum Entry {
    /// `--socket PATH` is accepted before the subcommand too (`gqlmuxctl --socket P status`).
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let first = arguments.first, first == "--socket", arguments.count >= 2 {
            arguments.append(contentsOf: ["--socket", arguments[1]])
            arguments.removeFirst(2)
        } else if let first = arguments.first, first.hasPrefix("--socket=") {
            arguments.append(first)
            arguments.removeFirst()
        }
        await GQLMuxCtl.main(arguments)
    }
}

struct GQLMuxCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gqlmuxctl",
        abstract: "Talk to gqlmuxd: subscribe, query, status, metrics, pause, resume, reload.",
        discussion: """
            Exit codes: 0 success; 1 the operation failed (GraphQL or daemon error); 64 usage error; \
            69 gqlmuxd unreachable; 77 not allowed (not an admin, or not in allowed_uids/gids). \
            With --json every line on stdout is one JSON object, and an error is printed on stderr as \
            {"error":{"code":"...","message":"..."}}.
            """,
        version: LocalProtocol.release,
        subcommands: [Status.self, Subscribe.self, Query.self, Metrics.self, Pause.self, Resume.self, Reload.self]
    )
}

struct Connection: ParsableArguments {
    @Option(name: .long, help: "gqlmuxd socket (default: $GQLMUX_SOCKET or /run/gqlmux/gqlmux.sock).")
    var socket: String?

    func client(reconnect: Bool = false) -> GQLMuxClient {
        GQLMuxClient(configuration: .init(socketPath: socket, clientName: "gqlmuxctl", reconnect: reconnect))
    }
}

struct Request: ParsableArguments {
    @Argument(help: "The GraphQL document.")
    var query: String

    @Option(name: .long, help: "Variables as a JSON object.")
    var variables: String?

    @Option(name: .customLong("operation-name"), help: "Which operation of the document to run.")
    var operationName: String?

    func validate() throws {
        if let variables {
            let object = try? JSONSerialization.jsonObject(with: Data(variables.utf8))
            guard object is [String: Any] else { throw ValidationError("--variables must be a JSON object") }
        }
    }

    var json: String {
        GQLMuxClient.requestJSON(query: query, variablesJSON: variables, operationName: operationName)
    }
}

struct Output: ParsableArguments {
    @Flag(name: .long, help: "Machine-readable output: one JSON object per line; errors as JSON on stderr.")
    var json = false
}

/// Prints an error to stderr (as text, or as `{"error":{…}}` with `--json`) and exits with the matching code.
func fail(_ error: any Error, json: Bool) -> ExitCode {
    if json {
        var object: [String: Any] = ["message": "\(error)"]
        if let error = error as? GQLMuxError {
            object = ["code": error.code, "message": error.message]
            if let closeCode = error.closeCode { object["closeCode"] = closeCode }
        }
        FileHandle.standardError.write(Data((jsonLine(["error": object]) + "\n").utf8))
    } else {
        FileHandle.standardError.write(Data("gqlmuxctl: \(error)\n".utf8))
    }
    guard let error = error as? GQLMuxError else { return ExitCode(ExitStatus.operationFailed) }
    switch error {
    case .daemonUnavailable: return ExitCode(ExitStatus.unavailable)
    case .forbidden: return ExitCode(ExitStatus.forbidden)
    default: return ExitCode(ExitStatus.operationFailed)
    }
}

func printLine(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// One compact JSON object, keys sorted (stable for scripts and tests).
func jsonLine(_ object: [String: Any]) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's state.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(), json: output.json) { client in
            let status = try await client.status()
            printLine(output.json ? status : Self.human(status))
        }
    }

    static func human(_ json: String) -> String {
        guard let s = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return json }
        let upstream = s["upstream"] as? [String: Any] ?? [:]
        let subs = s["subscriptions"] as? [String: Any] ?? [:]
        let messages = s["messages"] as? [String: Any] ?? [:]
        let connections = (upstream["connections"] as? [[String: Any]]) ?? []
        let pool =
            connections.count > 1
            ? "\n"
                + connections.map { c in
                    "  connection \(c["id"] ?? "?"): \(c["detail"] ?? c["state"] ?? "?"), \(c["operations"] ?? 0) operations (\(c["protocol"] ?? "?"))"
                }.joined(separator: "\n")
            : ""
        let http = (upstream["httpURL"] as? String).map { "\nqueries over:  \($0)" } ?? ""
        return """
            upstream:      \(upstream["url"] ?? "?") — \(upstream["detail"] ?? upstream["state"] ?? "?") (\(upstream["protocol"] ?? "?"))\(pool)\(http)
            reconnects:    \(upstream["reconnects"] ?? 0)
            clients:       \(s["clients"] ?? 0)
            subscriptions: \(subs["local"] ?? 0) local, \(subs["upstream"] ?? 0) upstream
            messages:      \(messages["in"] ?? 0) in, \(messages["out"] ?? 0) out
            """
    }
}

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Subscribe; print one JSON result per line on stdout, state changes on stderr."
    )
    @OptionGroup var connection: Connection
    @OptionGroup var request: Request
    @OptionGroup var output: Output
    @Option(name: .long, help: "Stop after this many results.")
    var count: Int?
    @Flag(name: .long, help: "Also print lifecycle states on stdout, as {\"state\":\"active\"} lines between the results.")
    var states = false

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        let states = self.states
        let json = output.json
        try await withClient(connection.client(reconnect: true), json: json) { client in
            let subscription = client.subscribe(requestJSON: request.json) { state in
                if states {
                    printLine(jsonLine(["state": state.rawValue]))
                } else if !json {
                    FileHandle.standardError.write(Data("state: \(state.rawValue)\n".utf8))
                }
            }
            var received = 0
            for try await result in subscription {
                printLine(result.json)
                received += 1
                if let count, received >= count { break }
            }
        }
    }
}

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run a query or a mutation; print its result.")
    @OptionGroup var connection: Connection
    @OptionGroup var request: Request
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(), json: output.json) { client in
            let result = try await client.single(requestJSON: request.json)
            printLine(result.json)
            if let errors = result.object?["errors"] as? [Any], !errors.isEmpty { throw ExitCode(ExitStatus.operationFailed) }
        }
    }
}

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Close the upstream and hold every subscription (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.pause() }
        if output.json { printLine(jsonLine(["ok": true])) }
    }
}

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Reconnect the upstream after pause or failure (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.resume() }
        if output.json { printLine(jsonLine(["ok": true])) }
    }
}

struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Re-read the configuration and credentials (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.reload() }
        if output.json { printLine(jsonLine(["ok": true])) }
    }
}

struct Metrics: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the daemon's metrics (Prometheus text format; --json: one sample per line)."
    )
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(), json: output.json) { client in
            let text = try await client.metrics()
            guard output.json else {
                FileHandle.standardOutput.write(Data(text.utf8))
                return
            }
            for sample in PrometheusSample.parse(text) {
                printLine(jsonLine(["name": sample.name, "labels": sample.labels, "value": sample.value]))
            }
        }
    }
}

/// Runs `body` with `client`, closes the client whatever happens, and turns an error into
/// its exit code (an `ExitCode` thrown by `body` passes through as it is).
func withClient(_ client: GQLMuxClient, json: Bool = false, _ body: (GQLMuxClient) async throws -> Void) async throws {
    do {
        try await body(client)
        await client.close()
    } catch let exit as ExitCode {
        await client.close()
        throw exit
    } catch {
        await client.close()
        throw fail(error, json: json)
    }
}
