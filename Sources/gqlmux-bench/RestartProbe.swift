import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Spawn

/// `gqlmux-bench - restart-probe LINE_SOCKET GRAPHQL_SOCKET LINE_CLIENTS WS_CLIENTS
/// STREAM_CLIENTS FDS_COMMAND STEP...`: the online restart, measured from the apps' side.
/// Connects LINE_CLIENTS line-protocol clients, WS_CLIENTS endpoint WebSocket clients (half
/// graphql-transport-ws, half graphql-ws) and STREAM_CLIENTS endpoint HTTP streams (half SSE,
/// half multipart), each subscribed to `subscription { tick }`, waits until every one
/// receives, then runs each STEP (a shell command: `systemctl restart gqlmuxd`, a package
/// install, …). After each it waits until every subscription received a result it had not
/// before, and prints a row: the step, how long until every subscription received again,
/// connections closed so far (by EOF or a WebSocket close frame), and FDS_COMMAND's output
/// (the daemon's descriptors and the store's) before and after. One line client's
/// transcript follows. Exits 1 when a client was closed or a subscription did not receive
/// again within 60 s.
func runRestartProbe(_ arguments: [String]) async throws -> Bool {
    guard arguments.count >= 6, let lines = Int(arguments[2]), let webSockets = Int(arguments[3]), let streams = Int(arguments[4]) else {
        say("usage: gqlmux-bench - restart-probe LINE_SOCKET GRAPHQL_SOCKET LINE_CLIENTS WS_CLIENTS STREAM_CLIENTS FDS_COMMAND STEP...")
        return false
    }
    let (lineSocket, graphqlSocket, fdsCommand) = (arguments[0], arguments[1], arguments[5])
    // Restarts are paced (a moment of steady state between them; the unit has no start limit).
    let pause = Double(ProcessInfo.processInfo.environment["PROBE_PAUSE_SECONDS"] ?? "") ?? 2.5
    let steps = Array(arguments.dropFirst(6))
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var probes: [ProbeCounters] = []
    // PROBE_SUBSCRIPTIONS: distinct subscriptions per line client (each its own upstream
    // operation, told apart by a variable), every one counted on its own.
    let perClient = max(1, Int(ProcessInfo.processInfo.environment["PROBE_SUBSCRIPTIONS"] ?? "") ?? 1)
    for index in 0..<lines {
        let ids = perClient == 1 ? ["t\(index)"] : (0..<perClient).map { "t\(index)-\($0)" }
        let client = try await ProbeLineClient.connect(lineSocket, group: group, transcript: index == 0, ids: ids)
        client.send(#"{"type":"connection_init","payload":{"client":"restart-probe"}}"# + "\n")
        var batch = ""
        for (number, id) in ids.enumerated() {
            let variables = perClient == 1 ? "" : #","variables":{"n":\#(index * perClient + number)}"#
            batch += #"{"type":"subscribe","id":"\#(id)","payload":{"query":"subscription Tick($n: Int) { tick }"\#(variables)}}"# + "\n"
        }
        client.send(batch)
        probes += ids.map { client.counters[$0]! }
    }
    for index in 0..<webSockets {
        let client = try await BenchWebSocketClient.subscribe(
            graphqlSocket,
            group: group,
            id: "w\(index)",
            query: "subscription { tick }",
            subprotocol: index % 2 == 0 ? "graphql-transport-ws" : "graphql-ws"
        )
        probes.append(client.probeCounters)
    }
    for index in 0..<streams {
        let client = try await BenchHTTPStreamClient.subscribe(
            graphqlSocket,
            group: group,
            kind: index % 2 == 0 ? .sse : .multipart,
            query: "subscription { tick }"
        )
        probes.append(client.probeCounters)
    }
    let total = probes.count
    func receivingAgain(since counts: [Int], timeout: Duration = .seconds(60)) async -> Bool {
        await waitUntil(timeout) { zip(probes, counts).allSatisfy { $0.results.value > $1 } }
    }
    guard await receivingAgain(since: [Int](repeating: 0, count: total)) else {
        say("restart-probe: not every client received a first result within 60 s")
        return false
    }
    // posix_spawn through Spawn: Foundation's Process failed with EBADF here once the probe
    // held a thousand sockets.
    func shell(_ command: String) async -> (status: Int32, output: String) {
        do {
            let (status, output) = try await runCommand("/bin/sh", ["-c", command], seconds: 300)
            return (status, output.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            return (127, "\(error)")
        }
    }
    say(
        "clients: \(lines) line protocol (\(perClient) subscriptions each), \(webSockets) endpoint WebSocket (\((webSockets + 1) / 2) graphql-transport-ws, \(webSockets / 2) graphql-ws), "
            + "\(streams) endpoint HTTP streams (\((streams + 1) / 2) SSE, \(streams / 2) multipart)"
    )
    say("step | command | exit | disconnects | every subscription receiving again after | descriptors before → after")
    var ok = true
    let firstFDs = await shell(fdsCommand).output
    for (number, step) in steps.enumerated() {
        if number > 0 { try await Task.sleep(for: .milliseconds(Int(pause * 1000))) }
        let before = await shell(fdsCommand).output
        let counts = probes.map(\.results.value)
        let start = ContinuousClock.now
        let ran = await shell(step)
        let back = await receivingAgain(since: counts)
        let elapsed = ContinuousClock.now - start
        let disconnects = probes.reduce(0) { $0 + $1.disconnects.value }
        let after = await shell(fdsCommand).output
        let recovery = back ? String(format: "%.2f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) : "NOT within 60 s"
        say("\(number + 1) | \(step) | \(ran.status) | \(disconnects) | \(recovery) | \(before) → \(after)")
        if ran.status != 0 { say("    output: \(ran.output.prefix(400))") }
        if !back || disconnects > 0 || ran.status != 0 {
            ok = false
            break
        }
    }
    say("descriptors at the start: \(firstFDs); at the end: \(await shell(fdsCommand).output)")
    say("line client t0's transcript (results elided):")
    for line in ProbeLineClient.transcript.withLockedValue({ $0 }) { say("    \(line)") }
    return ok
}

/// What the probe reads of each client: results received, and whether its connection ended
/// (a WebSocket's close frame is followed by its end, so it is counted there).
struct ProbeCounters: Sendable {
    let results = ManagedAtomicCounter()
    let disconnects = ManagedAtomicCounter()
}

/// A line-protocol client that counts its `next` lines and notices its connection closing;
/// the first one keeps its other lines (states) as a transcript.
/// `@unchecked Sendable` — safe because its mutable state (`partial`, `elided`) is touched only
/// in `channelRead`, which asserts it runs on the channel's loop (`assertInEventLoop`);
/// `channel` is set once by `connect` before the client is returned; what the probe reads from
/// its task is in lock-protected counters and the locked transcript.
final class ProbeLineClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    /// One per subscription id; the connection's end counts in each.
    let counters: [String: ProbeCounters]
    /// The only id, when there is one (no id to read from each line).
    private let single: ProbeCounters?
    static let transcript = NIOLockedValueBox<[String]>([])
    private let keepsTranscript: Bool
    private var partial: [UInt8] = []
    private var elided = 0
    private var channel: (any Channel)?

    init(transcript: Bool, ids: [String]) {
        keepsTranscript = transcript
        counters = Dictionary(uniqueKeysWithValues: ids.map { ($0, ProbeCounters()) })
        single = ids.count == 1 ? counters[ids[0]] : nil
    }

    static func connect(_ path: String, group: any EventLoopGroup, transcript: Bool, ids: [String]) async throws -> ProbeLineClient {
        let client = ProbeLineClient(transcript: transcript, ids: ids)
        // A thousand clients at once can fill the listener's backlog: a full one says EAGAIN, and
        // the client tries again (for at most 10 s), as an app would.
        for attempt in 0... {
            do {
                client.channel = try await ClientBootstrap(group: group)
                    .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(client) } }
                    .connect(unixDomainSocketPath: path).get()
                return client
            } catch let error as IOError where error.errnoCode == EAGAIN && attempt < 1000 {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        fatalError("unreachable")
    }

    func send(_ text: String) { channel?.writeAndFlush(ByteBuffer(string: text), promise: nil) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.eventLoop.assertInEventLoop()
        let buffer = unwrapInboundIn(data)
        var results = 0
        for byte in buffer.readableBytesView {
            guard byte == UInt8(ascii: "\n") else {
                partial.append(byte)
                continue
            }
            let isNext = partial.starts(with: Self.nextStart)
            if isNext {
                if single != nil {
                    results += 1
                } else if let id = Self.id(partial) {
                    counters[id]?.results.add(1)
                }
            }
            if keepsTranscript {
                if isNext {
                    elided += 1
                } else {
                    let line = String(decoding: partial, as: UTF8.self)
                    Self.transcript.withLockedValue {
                        if elided > 0 { $0.append("(\(elided) results)") }
                        $0.append(line)
                    }
                    elided = 0
                }
            }
            partial.removeAll(keepingCapacity: true)
        }
        if results > 0 { single?.results.add(results) }
    }

    private static let nextStart = Array(#"{"type":"next","id":""#.utf8)

    /// The id of a `next` line: the string after `"id":"`, which the daemon writes first.
    private static func id(_ line: [UInt8]) -> String? {
        let start = nextStart.count
        guard let end = line[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: line[start..<end], as: UTF8.self)
    }

    func channelInactive(context: ChannelHandlerContext) {
        for counter in counters.values { counter.disconnects.add(1) }
        context.fireChannelInactive()
    }
}

/// Prints a line at once (stdout into a file is block-buffered): rows appear as measured.
private func say(_ line: String) {
    print(line)
    fflush(nil)
}
