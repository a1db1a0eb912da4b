import Foundation
import GQLMuxDaemon
// Every file of this test target sees the shared helpers (until, eventually, repositoryRoot,
// ChildProcess) through this one import.
@_exported import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SystemdSupport
import TestUpstream
import Testing
import Upstream

/// Records daemon events for assertions.
final class EventLog: Changing {
    private let box = NIOLockedValueBox<[(DaemonEvent, String, [String: String])]>([])
    let changes = Changes()
    var events: DaemonEvents {
        DaemonEvents { e, m, f in
            self.box.withLockedValue { $0.append((e, m, f)) }
            self.changes.changed()
        }
    }
    func count(_ event: DaemonEvent) -> Int { box.withLockedValue { $0.filter { $0.0 == event }.count } }
    func all(_ event: DaemonEvent) -> [[String: String]] { box.withLockedValue { $0.filter { $0.0 == event }.map(\.2) } }
    /// Every message, in order.
    var messages: [String] { box.withLockedValue { $0.map(\.1) } }
}

/// A test upstream + a daemon on a temporary socket.
/// `@unchecked Sendable` — safe because only its test task changes it (`restartDaemon`);
/// closures passed to `eventually` only read it between those changes.
final class DaemonRig: @unchecked Sendable {
    let server: TestUpstreamServer
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let directory: String
    private var running: RunningDaemon
    var daemon: Daemon { running.daemon }
    let log = EventLog()
    /// Where the rig's daemons hand their clients over on a stop, when set (an online restart,
    /// ``restartOnline(damage:)``); unset, a stop closes them. Every daemon of the rig is made
    /// with hooks that ask this.
    let handoverStore = NIOLockedValueBox<Daemon.HandoverStore?>(nil)
    var socketPath: String { directory + "/gqlmux.sock" }
    var configPath: String { directory + "/gqlmuxd.toml" }

    /// - Parameter extraConfig: TOML appended after `[upstream] url`, e.g. `"[limits]\nmax_clients = 2"`.
    init(
        upstream options: TestUpstreamServer.Options = .init(),
        upstreamConfig: String = "",
        socketConfig: String = "",
        extraConfig: String = ""
    ) async throws {
        server = TestUpstreamServer(options: options)
        try await server.start()
        directory = try makeTemporaryDirectory("gqlmuxd-test")
        let toml = """
            [upstream]
            url = "\(server.url)"
            reconnect_interval = 0.1
            reconnect_max_interval = 1
            \(upstreamConfig)
            [socket]
            path = "\(directory)/gqlmux.sock"
            \(socketConfig)
            \(extraConfig)
            """
        try toml.write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let configuration = try DaemonConfiguration.load(path: directory + "/gqlmuxd.toml")
        running = try await Self.run(configuration, configPath: directory + "/gqlmuxd.toml", group: group, log: log, store: handoverStore)
        await until("upstream connected", on: log) { self.log.count(.connected) == 1 }
    }

    /// Waits until the upstream server holds `count` live subscriptions.
    func upstreamActive(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await until("\(count) active upstream subscriptions", upstream: server, sourceLocation: sourceLocation) { $0.activeSubscriptions == count }
    }

    /// Stops this daemon and starts a new one on the same socket and config (a daemon restart).
    func restartDaemon() async throws {
        await running.stop()
        let configuration = try DaemonConfiguration.load(path: configPath)
        running = try await Self.run(configuration, configPath: configPath, group: group, log: log, store: handoverStore)
    }

    /// An online restart as under systemd, with this process standing in for its file
    /// descriptor store: the daemon hands its clients over on SIGTERM (the store keeps a
    /// duplicate of each descriptor, as systemd does), and a new daemon is started with what
    /// the store holds, exactly as gqlmuxd passes it on. `damage` changes the record first.
    func restartOnline(damage: (([UInt8]) -> [UInt8])? = nil) async throws {
        let store = NIOLockedValueBox<Daemon.Inheritance?>(nil)
        handoverStore.withLockedValue {
            $0 = { package in
                let sockets = FileDescriptorStore.socketsByCookie()
                var inheritance = Daemon.Inheritance(record: .success(package.record))
                for cookie in package.clients {
                    guard let fd = sockets[cookie] else { continue }
                    inheritance.clients.append((dup(fd), cookie))
                }
                inheritance.line = package.listeners["line"].flatMap { sockets[$0] }.map { dup($0) }
                inheritance.graphql = package.listeners["graphql"].flatMap { sockets[$0] }.map { dup($0) }
                inheritance.tcp = package.listeners["tcp"].flatMap { sockets[$0] }.map { dup($0) }
                store.withLockedValue { $0 = inheritance }
            }
        }
        await running.stop()
        handoverStore.withLockedValue { $0 = nil }
        var inheritance = try #require(store.withLockedValue { $0 }, "the daemon handed nothing over")
        if let damage, case .success(let record) = inheritance.record { inheritance.record = .success(damage(record)) }
        let configuration = try DaemonConfiguration.load(path: configPath)
        running = try await Self.run(
            configuration,
            configPath: configPath,
            listeners: .init(inheritance: inheritance),
            group: group,
            log: log,
            store: handoverStore
        )
    }

    /// A daemon of the rig, running: its hooks hand over to `store` when it is set.
    private static func run(
        _ configuration: DaemonConfiguration,
        configPath: String,
        listeners: Daemon.AdoptedListeners = .init(),
        group: MultiThreadedEventLoopGroup,
        log: EventLog,
        store: NIOLockedValueBox<Daemon.HandoverStore?>
    ) async throws -> RunningDaemon {
        struct NoStore: Error {}
        let onlineRestart = DaemonHooks.OnlineRestart(
            store: { package in
                guard let store = store.withLockedValue({ $0 }) else { throw NoStore() }
                try store(package)
            },
            stopIsRestart: { store.withLockedValue { $0 } == nil ? (false, "no store in this test") : (true, "SIGTERM") }
        )
        return try await RunningDaemon(hooks: DaemonHooks(onlineRestart: onlineRestart)) { hooks in
            try Daemon(configuration: configuration, configPath: configPath, listeners: listeners, eventLoop: group.next(), events: log.events, hooks: hooks)
        }
    }

    /// The graceful stop gqlmuxd does on SIGTERM (the service group's shutdown).
    func stopDaemon() async { await running.stop() }

    /// Test clients run on their own loop, as separate processes would.
    let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    func connect(autoRead: Bool = true) async throws -> LineClient {
        try await LineClient.connect(socketPath, group: clientGroup, autoRead: autoRead)
    }

    /// Runs `body` with a fresh rig and always tears it down, also when `body` throws (a
    /// failed `#require`), so no test leaks loops, sockets or servers.
    static func with(
        upstream options: TestUpstreamServer.Options = .init(),
        upstreamConfig: String = "",
        socketConfig: String = "",
        extraConfig: String = "",
        _ body: (DaemonRig) async throws -> Void
    ) async throws {
        let rig = try await DaemonRig(upstream: options, upstreamConfig: upstreamConfig, socketConfig: socketConfig, extraConfig: extraConfig)
        try await scoped(rig, tearDown: { await $0.tearDown() }, body)
    }

    func tearDown() async {
        await running.stop()
        await server.shutdown()
        try? await group.shutdownGracefully()
        try? await clientGroup.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A raw local-protocol client: writes lines, collects the lines it reads.
/// `@unchecked Sendable` — safe because NIO calls it on its channel's loop, what it records is
/// in a lock-protected box, and `channel` is set once before any other use.
final class LineClient: ChannelInboundHandler, Changing, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let box = NIOLockedValueBox<(lines: [String], closed: Bool, errors: [String])>(([], false, []))
    let changes = Changes()
    private(set) var channel: (any Channel)!

    static func connect(_ path: String, group: any EventLoopGroup, autoRead: Bool = true) async throws -> LineClient {
        let client = LineClient()
        client.channel = try await ClientBootstrap(group: group)
            .channelOption(.autoRead, value: autoRead)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineDecoder()))
                    try channel.pipeline.syncOperations.addHandler(client)
                }
            }
            .connect(unixDomainSocketPath: path).get()
        return client
    }

    var lines: [String] { box.withLockedValue { $0.lines } }
    var isClosed: Bool { box.withLockedValue { $0.closed } }
    /// Errors its connection reported (a reset instead of an orderly end, for one).
    var errors: [String] { box.withLockedValue { $0.errors } }
    func lines(containing text: String) -> [String] { lines.filter { $0.contains(text) } }

    func send(_ text: String) {
        channel.writeAndFlush(ByteBuffer(string: text.hasSuffix("\n") ? text : text + "\n"), promise: nil)
    }

    func subscribe(id: String, _ query: String = "subscription { tick }") {
        send(#"{"type":"subscribe","id":"\#(id)","payload":{"query":\#(jsonString(query))}}"#)
    }

    /// Drops the connection without any goodbye (a crashed client).
    func crash() { channel.close(promise: nil) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let line = String(buffer: unwrapInboundIn(data))
        box.withLockedValue { $0.lines.append(line) }
        changes.changed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        box.withLockedValue { $0.closed = true }
        changes.changed()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        box.withLockedValue { $0.errors.append("\(error)") }
        changes.changed()
        context.close(promise: nil)
    }
}

/// Newline framing for the test client (no limit).
struct LineDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else { return .needMoreData }
        let line = buffer.readSlice(length: newline - buffer.readerIndex)!
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(Self.wrapInboundOut(line))
        return .continue
    }
}
