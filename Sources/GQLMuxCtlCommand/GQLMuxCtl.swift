import ArgumentParser
import GQLMuxClientCore
import JSONEnvelope
import LocalProtocol
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Exit codes a shell script can rely on (sysexits.h where one fits).
enum ExitStatus {
    /// The operation failed: a GraphQL error, or a daemon error for it.
    static let operationFailed: Int32 = 1
    /// gqlmuxd could not be reached (EX_UNAVAILABLE).
    static let unavailable: Int32 = 69
    /// The daemon refused this user or verb (EX_NOPERM).
    static let forbidden: Int32 = 77
}

/// gqlmuxctl's entry point: the `gqlmuxctl` program, and `gqlmuxd` when it is run under the
/// name gqlmuxctl (the package installs one binary for both).
public enum GQLMuxCtlEntry {
    /// Runs the command line `arguments` (without the program name) and exits.
    /// `--socket PATH` is accepted before the subcommand too (`gqlmuxctl --socket P status`).
    public static func main(_ arguments: [String]) async {
        var arguments = arguments
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
        abstract: "Talk to gqlmuxd: subscribe, query, status, clients, operations, top, metrics, pause, resume, reload, restart.",
        discussion: """
            Exit codes: 0 success; 1 the operation failed (GraphQL or daemon error); 64 usage error; \
            69 gqlmuxd unreachable; 77 not allowed (not an admin, or not in allowed_uids/gids). \
            With --json every line on stdout is one JSON object, and an error is printed on stderr as \
            {"error":{"code":"...","message":"..."}}.
            """,
        version: LocalProtocol.release,
        subcommands: [
            Status.self, Subscribe.self, Query.self, Metrics.self, Clients.self, Operations.self, Top.self, Pause.self, Resume.self, Reload.self, Restart.self,
        ]
    )
}

struct Connection: ParsableArguments {
    @Option(name: .long, help: "gqlmuxd socket (default: $GQLMUX_SOCKET or /run/gqlmux/gqlmux.sock).")
    var socket: String?

    func client(reconnect: Bool = false, presenting credential: Credential? = nil) throws -> GQLMuxClient {
        GQLMuxClient(
            configuration: .init(
                socketPath: socket,
                clientName: "gqlmuxctl",
                reconnect: reconnect,
                upstreamPayloadJSON: try credential?.payloadJSON(),
                upstreamHeaders: try credential?.headerTable() ?? [:]
            )
        )
    }
}

/// The credential gqlmuxctl presents for the upstreams configured with `identity = "client"`, as
/// an app would (other upstreams never see it): a connecting payload and request headers.
struct Credential: ParsableArguments {
    @Option(
        name: .customLong("payload-file"),
        help: ArgumentHelp(
            "A file holding a JSON object: the upstream connecting payload to present for identity = \"client\" upstreams.",
            valueName: "file"
        )
    )
    var payloadFile: String?

    @Option(
        name: .customLong("header"),
        help: ArgumentHelp(
            "A request header to present for identity = \"client\" upstreams, as 'Name: value' (repeatable; those in the upstream's forward_headers go upstream).",
            valueName: "header"
        )
    )
    var headers: [String] = []

    @Option(
        name: .customLong("header-file"),
        help: ArgumentHelp(
            "A file of request headers to present for identity = \"client\" upstreams, one 'Name: value' per line (keeps secrets off the command line, which every local user can read).",
            valueName: "file"
        )
    )
    var headerFile: String?

    /// The largest payload file read: far above any `[limits] max_credential_bytes` worth setting.
    static let largestPayloadFile = 1 << 20

    func validate() throws {
        _ = try payloadJSON()
        _ = try headerTable()
    }

    /// The payload file's JSON object, as text; nil without `--payload-file`.
    func payloadJSON() throws -> String? {
        guard let payloadFile else { return nil }
        let text: String
        do {
            text = try readWholeFile(payloadFile, atMost: Self.largestPayloadFile)
        } catch {
            throw ValidationError("--payload-file \(payloadFile): \(error)")
        }
        guard JSONValue.parse(text)?.isObject == true else {
            throw ValidationError("--payload-file \(payloadFile): not a JSON object")
        }
        return text
    }

    /// The `--header` and `--header-file` values by name; a malformed or repeated one is a
    /// usage error. Errors never repeat a value (it may be a secret).
    func headerTable() throws -> [String: String] {
        var lines = headers.map { (flag: "--header", text: $0) }
        if let headerFile {
            let text: String
            do {
                text = try readWholeFile(headerFile, atMost: Self.largestPayloadFile)
            } catch {
                throw ValidationError("--header-file \(headerFile): \(error)")
            }
            let fileLines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
            lines += fileLines.map(String.init).filter { !$0.allSatisfy(\.isWhitespace) }.map { (flag: "--header-file \(headerFile)", text: $0) }
        }
        var table: [String: String] = [:]
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for (flag, header) in lines {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("\(flag): write each header as 'Name: value'")
            }
            let name = String(header[..<colon])
            let value = String(header[header.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" }))
            guard !name.isEmpty, name.allSatisfy(token.contains) else {
                throw ValidationError("\(flag): a header name may hold only letters, digits and !#$%&'*+-.^_`|~")
            }
            // By scalar: "\r\n" is one Character, equal to neither "\r" nor "\n".
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw ValidationError("\(flag) \(name): the value holds a line break or NUL")
            }
            guard table.updateValue(value, forKey: name.lowercased()) == nil else {
                throw ValidationError("\(flag) \(name): given twice")
            }
        }
        return table
    }
}

/// A file's whole text (UTF-8), at most `limit` bytes; throws its error's text.
func readWholeFile(_ path: String, atMost limit: Int) throws -> String {
    struct FileError: Error, CustomStringConvertible { var description: String }
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(description: String(cString: strerror(errno))) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n >= 0 else { throw FileError(description: String(cString: strerror(errno))) }
        if n == 0 { break }
        bytes += chunk[..<n]
        guard bytes.count <= limit else { throw FileError(description: "larger than \(limit) bytes") }
    }
    guard let text = String(validating: bytes, as: UTF8.self) else { throw FileError(description: "not UTF-8") }
    return text
}

struct Request: ParsableArguments {
    @Argument(help: "The GraphQL document.")
    var query: String

    @Option(name: .long, help: "Variables as a JSON object.")
    var variables: String?

    @Option(name: .customLong("operation-name"), help: "Which operation of the document to run.")
    var operationName: String?

    @Flag(
        name: .customLong("replay-last"),
        help: "Joining a subscription the daemon already shares, receive its latest result at once (extensions.gqlmux.replayLast)."
    )
    var replayLast = false

    @Option(
        name: .long,
        help: "A query to run each time the subscription's stream resumes after an outage; its result comes first (extensions.gqlmux.resnapshot)."
    )
    var resnapshot: String?

    @Option(name: .long, help: "The upstream to ask, by its name in the configuration (default: the one [upstream] configures).")
    var upstream: String?

    func validate() throws {
        if let variables {
            guard JSONValue.parse(variables)?.isObject == true else { throw ValidationError("--variables must be a JSON object") }
        }
    }

    var json: String {
        GQLMuxClient.requestJSON(
            query: query,
            variablesJSON: variables,
            operationName: operationName,
            replayLast: replayLast ? true : nil,
            resnapshot: resnapshot
        )
    }
}

struct Output: ParsableArguments {
    @Flag(name: .long, help: "Machine-readable output: one JSON object per line; errors as JSON on stderr.")
    var json = false
}

/// Prints an error to stderr (as text, or as `{"error":{…}}` with `--json`) and exits with the matching code.
func fail(_ error: any Error, json: Bool) -> ExitCode {
    if json {
        var object: [String: JSONValue] = ["message": .string("\(error)")]
        if let error = error as? GQLMuxError {
            object = ["code": .string(error.code), "message": .string(error.message)]
            if let closeCode = error.closeCode { object["closeCode"] = .number(closeCode) }
            if let limit = error.limit { object["limit"] = .string(limit) }
        }
        printError(jsonLine(["error": .object(object)]))
    } else {
        printError("gqlmuxctl: \(error)")
    }
    guard let error = error as? GQLMuxError else { return ExitCode(ExitStatus.operationFailed) }
    switch error {
    case .daemonUnavailable: return ExitCode(ExitStatus.unavailable)
    case .forbidden: return ExitCode(ExitStatus.forbidden)
    default: return ExitCode(ExitStatus.operationFailed)
    }
}

/// Writes `text` and a newline to standard output, whole (retrying short writes).
func printLine(_ text: String) { write(text + "\n", to: STDOUT_FILENO) }

/// Writes `text` and a newline to standard error.
func printError(_ text: String) { write(text + "\n", to: STDERR_FILENO) }

func write(_ text: String, to fd: Int32) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return }
        bytes = bytes.dropFirst(n)
    }
}

/// One compact JSON object, keys sorted (stable for scripts and tests).
func jsonLine(_ object: [String: JSONValue]) -> String {
    JSONValue.object(object).sortingKeys.text
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
        guard let s = JSONValue.parse(json), s.isObject else { return json }
        /// A value as the summary shows it: strings bare, anything else as JSON, `fallback` if
        /// absent; never what a terminal would act on (a server's close reason is in `detail`).
        func show(_ value: JSONValue?, _ fallback: String = "?") -> String {
            guard let value, value != .null else { return fallback }
            return TextCell.sanitized(value.stringValue ?? value.text)
        }
        let upstream = s["upstream"]
        let subs = s["subscriptions"]
        let messages = s["messages"]
        let connections = upstream?["connections"]?.arrayValue ?? []
        let pool =
            connections.count > 1
            ? "\n"
                + connections.map { c in
                    "  connection \(show(c["id"])): \(show(c["detail"] ?? c["state"])), \(show(c["operations"], "0")) operations (\(show(c["protocol"])))"
                }.joined(separator: "\n")
            : ""
        let http = upstream?["httpURL"]?.stringValue.map { "\nqueries over:  \($0)" } ?? ""
        // Several upstreams: one line each, after the default's.
        var table = ""
        if case .object(let members)? = s["upstreams"], members.count > 1 {
            table = members.dropFirst().map { member in
                let (name, entry) = (member.key, member.value)
                let identity = entry["identity"]?.stringValue.flatMap { $0 == "host" ? nil : ", identity \($0)" } ?? ""
                return "\nupstream \(name): \(show(entry["url"])) — \(show(entry["detail"] ?? entry["state"]))\(identity), "
                    + "\(show(entry["subscriptions"]?["local"], "0")) local, \(show(entry["subscriptions"]?["upstream"], "0")) upstream subscriptions"
            }.joined()
        }
        return """
            upstream:      \(show(upstream?["url"])) — \(show(upstream?["detail"] ?? upstream?["state"])) (\(show(upstream?["protocol"])))\(pool)\(http)\(table)
            reconnects:    \(show(upstream?["reconnects"], "0"))
            clients:       \(show(s["clients"], "0"))
            subscriptions: \(show(subs?["local"], "0")) local, \(show(subs?["upstream"], "0")) upstream
            messages:      \(show(messages?["in"], "0")) in, \(show(messages?["out"], "0")) out
            """
    }
}

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Subscribe; print one JSON result per line on stdout, state changes on stderr."
    )
    @OptionGroup var connection: Connection
    @OptionGroup var request: Request
    @OptionGroup var credential: Credential
    @OptionGroup var output: Output
    @Option(name: .long, help: "Stop after this many results.")
    var count: Int?
    @Flag(
        name: .long,
        help: "Also print lifecycle states on stdout, as {\"state\":\"active\"} lines between the results ({\"state\":\"active\",\"gapMs\":N} after an outage)."
    )
    var states = false

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        let states = self.states
        let json = output.json
        try await withClient(connection.client(reconnect: true, presenting: credential), json: json) { client in
            // The gap is told just before the `active` it belongs to, on the same thread.
            let gap = NIOLockedValueBox<Duration?>(nil)
            let subscription = client.subscribe(
                requestJSON: request.json,
                upstream: request.upstream,
                onStateChange: { state in
                    let gapMs = gap.withLockedValue { told in
                        defer { told = nil }
                        return told.map { Int($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) }
                    }
                    if states {
                        var line: [String: JSONValue] = ["state": .string(state.rawValue)]
                        if let gapMs { line["gapMs"] = .number(String(gapMs)) }
                        printLine(jsonLine(line))
                    } else if json {
                        var line: [String: JSONValue] = ["state": .string(state.rawValue)]
                        if let gapMs { line["gapMs"] = .number(String(gapMs)) }
                        printError(jsonLine(line))
                    } else {
                        printError("state: \(state.rawValue)" + (gapMs.map { " (the stream was down \($0) ms; events meanwhile are lost)" } ?? ""))
                    }
                },
                onGap: { told in gap.withLockedValue { $0 = told } }
            )
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
    @OptionGroup var credential: Credential
    @OptionGroup var output: Output

    func run() async throws {
        try await withClient(connection.client(presenting: credential), json: output.json) { client in
            let result = try await client.single(requestJSON: request.json, upstream: request.upstream)
            printLine(result.json)
            if let errors = JSONValue.parse(result.json)?["errors"]?.arrayValue, !errors.isEmpty { throw ExitCode(ExitStatus.operationFailed) }
        }
    }
}

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Close the upstream and hold every subscription (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Option(name: .long, help: "Only this upstream, by its name in the configuration (default: every one).")
    var upstream: String?
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.pause(upstream: upstream) }
        if output.json { printLine(jsonLine(["ok": .bool(true)])) }
    }
}

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Reconnect the upstream after pause or failure (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Option(name: .long, help: "Only this upstream, by its name in the configuration (default: every one).")
    var upstream: String?
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.resume(upstream: upstream) }
        if output.json { printLine(jsonLine(["ok": .bool(true)])) }
    }
}

struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Re-read the configuration and credentials (admin).")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.reload() }
        if output.json { printLine(jsonLine(["ok": .bool(true)])) }
    }
}

struct Restart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restart gqlmuxd without closing a client: the next process adopts every connection (admin; needs systemd).",
        discussion: """
            gqlmuxd hands its clients' connections to systemd's file descriptor store and exits; \
            systemd starts it again (RestartForceExitStatus=75 in gqlmuxd.service) and the new \
            process adopts them. Apps see a gap in their results, never a close. Without systemd \
            (no file descriptor store) the daemon refuses.
            """
    )
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    func run() async throws {
        try await withClient(connection.client(), json: output.json) { try await $0.restart() }
        if output.json { printLine(jsonLine(["ok": .bool(true)])) }
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
                write(text, to: STDOUT_FILENO)
                return
            }
            for sample in PrometheusSample.parse(text) {
                printLine(jsonLine(["name": .string(sample.name), "labels": .object(sample.labels.mapValues { .string($0) }), "value": sample.value]))
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
