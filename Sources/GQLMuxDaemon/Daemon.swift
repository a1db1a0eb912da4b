import FoundationEssentials
import GQLMuxConfiguration
import GQLMuxVocabulary
import GraphQLTransportWS
import Handover
import LocalProtocol
import NIOCore
import NIOPosix
import SystemdSupport
import Upstream

#if canImport(Glibc)
import Glibc
#endif

/// gqlmuxd: the control plane. It owns the listeners, the registry of upstreams and the
/// switchboard between them and the clients; it starts, reloads, restarts and stops them.
/// Everything runs on one event loop, so the hot path never hops threads.
///
/// `@unchecked Sendable` — safe because every stored `var` is read and written on
/// ``eventLoop`` only: `start`, `shutdown` and `reload` hop there (`onLoop`, `submit`), and
/// the rest runs in channel handlers and transport callbacks of channels on that loop; entry
/// points from them call `eventLoop.assertInEventLoop()` (checked in debug builds and tests).
package final class Daemon: @unchecked Sendable {
    package static let version = LocalProtocol.release

    package let eventLoop: any EventLoop
    package let events: DaemonEvents
    var configuration: DaemonConfiguration
    let configPath: String?
    let switchboard: Switchboard
    /// Every upstream, each lane with its carriers (WebSocket pool, HTTP streams, `http_url`).
    let upstreams: UpstreamRegistry
    /// How the carriers reach the switchboard; disconnected once the upstreams are shut down.
    private let carrierSink: CarrierSink
    /// The clients connected now, each by its session (``LiveSessions``), which the budget measures too.
    let sessions: LiveSessions
    /// Connection numbers, cuts per app and each upstream lane's health (`clients`, `status`).
    let view = OperatorView()
    /// The listeners systemd passed (socket activation), adopted instead of binding.
    let listeners: AdoptedListeners
    /// Prometheus metrics (`metrics` verb, `[metrics] listen`).
    let metrics = DaemonMetrics()
    /// What the daemon tells, and asks, the process that runs it: given at initialisation.
    let hooks: DaemonHooks
    /// The exit status gqlmuxd.service restarts on (`RestartForceExitStatus=`).
    package static let restartExitCode: Int32 = 75
    /// `[metrics] listen` and where the sibling ``MetricsEndpoint`` listens once bound.
    let metricsBinding: MetricsBinding
    /// What it listens on, and each listener's limits and journal limits (``Listening``).
    var listening: Listening
    /// Where it is in its run: stopping, restarting, reloading (``RunState``).
    var run = RunState()
    /// `gqlmuxctl restart` asked for this stop (``RunState/restartRequested``).
    package var restartRequested: Bool { run.restartRequested }

    /// - Parameters:
    ///   - configuration: the parsed configuration.
    ///   - configPath: re-read on reload; nil keeps the configuration as given.
    ///   - listeners: sockets systemd passed, used instead of binding.
    ///   - hooks: what the daemon tells the service manager, and how it hands over.
    package init(
        configuration: DaemonConfiguration,
        configPath: String?,
        listeners: AdoptedListeners = AdoptedListeners(),
        eventLoop: any EventLoop,
        events: DaemonEvents,
        hooks: DaemonHooks = DaemonHooks()
    ) throws {
        self.hooks = hooks
        self.configuration = configuration
        self.configPath = configPath
        self.listeners = listeners
        self.metricsBinding = MetricsBinding(listen: configuration.metricsListen)
        self.listening = Listening(descriptorPlan: DescriptorPlan(openFiles: Self.openFileLimit(), configuration: configuration))
        self.eventLoop = eventLoop
        self.events = events
        // Start-up reads the CA files here, before anything is served; a reload prepares
        // them off the loop (`Daemon+Reload.swift`).
        let definitions = try Self.definitions(configuration, checkPayloadFile: false)
        // The carriers tell the switchboard, which is made after them (it sends through them).
        let sink = CarrierSink(eventLoop: eventLoop)
        self.carrierSink = sink
        self.upstreams = UpstreamRegistry(
            definitions,
            maxIdentities: configuration.limits.maxIdentities,
            eventLoop: eventLoop,
            readEnded: { sink.readEnded() }
        ) { id, update in sink.deliver(id, update) }
        let sessions = LiveSessions()
        self.sessions = sessions
        let budget = MemoryBudget(limit: configuration.limits.totalBufferBytes, sessions: sessions, eventLoop: eventLoop, events: events)
        let registry = upstreams
        let lanes = Dictionary(
            uniqueKeysWithValues: definitions.compactMap { definition in
                registry.lanes(of: definition.name).first.map { ($0.id, definition.layout) }
            }
        )
        self.switchboard = Switchboard(
            eventLoop: eventLoop,
            events: events,
            metrics: metrics,
            configuration: configuration,
            upstream: upstreams,
            budget: budget,
            lanes: lanes
        )
        sink.switchboard = switchboard
        upstreams.observe { [weak self] lane, connection, event in self?.transportEvent(event, lane: lane, connection: connection) }
        upstreams.laneClosed = { [unowned self] lane in self.identityClosed(lane) }
        budget.retained = { [unowned switchboard] in switchboard.retainedBytes }
        budget.forgetRetained = { [unowned switchboard] in switchboard.forgetLastResults() }
    }

    /// Shuts every upstream down, then disconnects the carriers from the switchboard (which
    /// they held, and which holds the registry). On the loop.
    func shutDownUpstreams() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        let sink = carrierSink
        return upstreams.shutdownOnLoop().always { _ in sink.disconnect() }
    }

    // MARK: - Start and stop

    /// Binds the socket (replacing a stale file) or adopts the one systemd passed, then starts
    /// the upstream. With `[metrics] listen` it first waits until the sibling
    /// ``MetricsEndpoint`` listens. The listeners accept nobody until the daemon's state (its
    /// addresses, the started upstream) is set: a client already waiting on a socket systemd
    /// passed is answered by the daemon `status` describes whole. Its state is written on the
    /// loop (`onLoop`), like every other access to it.
    package func start() async throws {
        MemoryBudget.keepFreedHeap()
        let configuration = try await onLoop { self.configuration }
        // A socket unit's listener, else this process's own from before a restart.
        let inheritance = listeners.inheritance
        let listeningFD = listeners.line ?? inheritance.line
        let endpointFD = listeners.graphql ?? inheritance.graphql
        var bound: String?
        if metricsBinding.listen != nil {
            for try await address in metricsBinding.bound.stream {
                bound = address
                break
            }
        }
        let metricsAddress = bound
        let server = try await bindLocalSocket(configuration, listeningFD: listeningFD)
        let endpoint: [any Channel]
        do {
            endpoint = try await bindEndpoint(configuration, adoptedFD: endpointFD, adoptedTCP: inheritance.tcp)
        } catch {
            try? await server.close()
            throw error
        }
        let endpointFile = listeners.graphql == nil ? configuration.graphqlEndpoint.socketPath(beside: configuration.socketPath) : nil
        let endpointAddresses = endpoint.map { channel -> String in
            if let path = channel.localAddress?.pathname { return path }
            return "http://" + (channel.localAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "?") + configuration.graphqlEndpoint.path
        }
        try await onLoop {
            self.listening.serverChannel = server
            self.listening.ownsSocketFile = self.listeners.line == nil
            self.listening.metricsAddress = metricsAddress
            self.listening.endpointChannels = endpoint
            self.listening.endpointSocketFile = endpointFile
            self.listening.endpointAddresses = endpointAddresses
            var fields = [
                "GQLMUX_SOCKET": configuration.socketPath, "GQLMUX_VERSION": Self.version, "GQLMUX_SOCKET_ACTIVATED": self.listeners.line == nil ? "no" : "yes",
                "GQLMUX_NOFILE": "\(self.listening.descriptorPlan.openFiles)",
            ]
            if let metricsAddress { fields["GQLMUX_METRICS"] = metricsAddress }
            if !endpointAddresses.isEmpty {
                fields["GQLMUX_GRAPHQL_ENDPOINT"] = endpointAddresses.joined(separator: " ")
                fields["GQLMUX_GRAPHQL_ACTIVATED"] = self.listeners.graphql == nil ? "no" : "yes"
            }
            self.events.emit(
                .started,
                fields,
                message: "gqlmuxd \(Self.version) listening on \(configuration.socketPath)"
                    + (metricsAddress.map { "; metrics on http://\($0)/metrics" } ?? "") + "; open-file limit \(self.listening.descriptorPlan.openFiles)"
            )
            self.logListeners(
                endpointSocket: endpointAddresses.contains { $0.hasPrefix("/") },
                endpointTCP: endpointAddresses.contains { !$0.hasPrefix("/") }
            )
            self.upstreams.start()
            self.statusChanged()
        }
        // The previous process's clients, if it handed them over, before anyone new.
        await adopt(inheritance)
        try await onLoop {
            for listener in [server] + endpoint { Self.startAccepting(listener) }
        }
    }

    /// Listeners are bound with `autoRead` off (``acceptingLater``); this lets `listener` accept.
    private static func startAccepting(_ listener: any Channel) {
        listener.setOption(.autoRead, value: true).whenFailure { _ in listener.close(promise: nil) }
    }

    /// Runs `body` on the daemon's loop and returns its result.
    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await eventLoop.submit(body).get()
    }

    private func bindLocalSocket(_ configuration: DaemonConfiguration, listeningFD: CInt?) async throws -> any Channel {
        let limits = configuration.limits
        let bootstrap = ServerBootstrap(group: eventLoop)
            .acceptingLater()
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(self.acceptBackoff(.lineSocket)) }
            }
            .clientSocketOptions(limits, origin: .lineSocket)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    guard self.admitConnection(channel, origin: .lineSocket) else {
                        return try sync.addHandler(RefuseConnection(self.refusal(for: .lineSocket)))
                    }
                    try self.configureClient(channel, listener: .lineSocket, arrival: .accepted)
                }
            }
        if let fd = listeningFD {
            return try await bootstrap.withBoundSocket(fd).get()
        }
        let path = configuration.socketPath
        try Self.prepareSocketPath(path)
        let channel = try await bootstrap.withBoundSocket(Self.listeningUnixSocket(path)).get()
        guard chmod(path, mode_t(configuration.socketMode)) == 0 else {
            try? await channel.close()
            throw DaemonError("cannot set mode \(String(configuration.socketMode, radix: 8)) on \(path): \(String(cString: strerror(errno)))")
        }
        return channel
    }

    /// A Unix stream socket bound to `path` (a stale file replaced) and listening
    /// (``UnixSocketFile``: bound so that it keeps its path when handed to the next process).
    static func listeningUnixSocket(_ path: String) throws -> CInt {
        do throws(UnixSocketFile.Failure) { return try UnixSocketFile.listen(at: path) } catch { throw DaemonError(error.description) }
    }

    /// Refuses to steal the socket of a live daemon; creates the directory if missing.
    static func prepareSocketPath(_ path: String) throws {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        guard FileManager.default.fileExists(atPath: path) else { return }
        if UnixSocketFile.isServed(path) { throw DaemonError("another process is already serving \(path)") }
    }

    /// Graceful stop: `SHUTTING_DOWN` to clients, `complete` upstream, close 1000, remove the socket.
    /// - Parameter reason: why this is a stop and not a restart (with a file descriptor store).
    package func shutdown(reason: String? = nil) async {
        let alreadyStopping = try? await eventLoop.submit { () -> Bool in
            defer { self.run.stopping = true }
            return self.run.stopping
        }.get()
        guard alreadyStopping == false else { return }
        events.emit(
            .stopping,
            reason.map { ["GQLMUX_REASON": $0] } ?? [:],
            message: "stopping: closing clients and the upstream" + (reason.map { " (\($0))" } ?? "")
        )
        let listeners = try? await onLoop { [self.listening.serverChannel].compactMap { $0 } + self.listening.endpointChannels }
        for channel in listeners ?? [] { try? await channel.close() }
        let closes: [EventLoopFuture<Void>] =
            (try? await eventLoop.submit {
                let sessions = Array(self.sessions.values)
                self.switchboard.shutDown()
                for session in sessions { session.shutDown() }
                return sessions.map { $0.channel.closeFuture }
            }.get()) ?? []
        _ = try? await EventLoopFuture.andAllComplete(closes, on: eventLoop).get()
        try? await eventLoop.flatSubmit { self.shutDownUpstreams() }.get()
        let socketFile = try? await onLoop { self.listening.ownsSocketFile ? self.configuration.socketPath : nil }
        if let path = socketFile ?? nil { unlink(path) }
        let endpointFile = try? await onLoop { self.listening.endpointSocketFile }
        if let path = endpointFile ?? nil { unlink(path) }
    }

    // MARK: - Admin

    func pause() { _ = pause(upstream: nil) }

    func resume() { _ = resume(upstream: nil) }

    /// Pauses one upstream by name, or every one (nil).
    func pause(upstream name: String?) -> LaneRefusal? { hold(true, upstream: name) }

    /// Resumes one upstream by name, or every one (nil).
    func resume(upstream name: String?) -> LaneRefusal? { hold(false, upstream: name) }

    private func hold(_ pause: Bool, upstream name: String?) -> LaneRefusal? {
        guard pause ? upstreams.pause(upstream: name) : upstreams.resume(upstream: name) else {
            return LaneRefusal(code: .unknownUpstream, message: "no upstream is named '\(name?.prefix(64) ?? "")'")
        }
        let verb = pause ? "paused" : "resumed"
        events.emit(
            pause ? .paused : .resumed,
            name.map { ["GQLMUX_UPSTREAM": $0] } ?? [:],
            message: "upstream \(name.map { $0 + " " } ?? "")\(verb) by an admin"
        )
        return nil
    }

    /// Admin verbs: root, the daemon's own uid, or `admin_uids` / `admin_gids`.
    func isAdmin(_ peer: PeerCredentials?) -> Bool {
        Self.peer(peer, isRootSelfOrIn: configuration.security.adminUIDs, configuration.security.adminGIDs)
    }

    /// Everyone when both allow lists are empty; else root, the daemon's own uid, or the lists.
    private func isAllowed(_ peer: PeerCredentials?) -> Bool {
        let security = configuration.security
        if security.allowedUIDs.isEmpty && security.allowedGIDs.isEmpty { return true }
        return Self.peer(peer, isRootSelfOrIn: security.allowedUIDs, security.allowedGIDs)
    }

    private static func peer(_ peer: PeerCredentials?, isRootSelfOrIn uids: [UInt32], _ gids: [UInt32]) -> Bool {
        guard let peer else { return false }
        return peer.uid == 0 || peer.uid == getuid() || uids.contains(peer.uid) || peer.isInAnyGroup(of: gids)
    }

    // MARK: - Sessions

    func sessionOpened(_ session: ClientSession) {
        eventLoop.assertInEventLoop()
        if run.stopping {
            session.fail(code: LocalErrorCode.shuttingDown, Switchboard.shuttingDownMessage)
            return
        }
        // The endpoint's TCP port has no peer credentials: with allowed_uids set it needs a token
        // or allow_all_local_users (checked when the configuration is read).
        guard session.arrival.listener == .endpointTCP || isAllowed(session.credentials) else {
            events.emit(.clientRefused, session.fields(), message: "peer not in allowed_uids/allowed_gids")
            session.fail(code: LocalErrorCode.forbidden, "this user may not use gqlmuxd (allowed_uids / allowed_gids)")
            return
        }
        sessions[ObjectIdentifier(session)] = session
        if session.number == 0 { session.number = view.number() }
        events.emit(.clientConnected, session.fields(), message: "client connected (\(session.peerDescription))")
        statusChanged()
    }

    func sessionClosed(_ session: ClientSession) {
        eventLoop.assertInEventLoop()
        guard sessions.removeValue(forKey: ObjectIdentifier(session)) != nil else { return }
        events.emit(.clientDisconnected, session.fields(), message: "client disconnected (\(session.peerDescription))")
        statusChanged()
    }

    // MARK: - Status

    func connectionAck() -> SessionMessage {
        eventLoop.assertInEventLoop()
        return .connectionAck(upstreamState: (upstreams.primary?.stateOnLoop ?? .idle).name.rawValue)
    }

    /// The daemon at this instant: the one value `status`, `STATUS=` and the metrics read.
    var reportOnLoop: StatusReport {
        eventLoop.assertInEventLoop()
        let table = upstreamReports
        return StatusReport(
            version: Self.version,
            upstream: table[0].snapshot,
            upstreams: table,
            reloadError: run.reloadError,
            metricsAddress: listening.metricsAddress,
            endpointAddresses: listening.endpointAddresses,
            clients: sessions.count,
            localSubscriptions: switchboard.localCount,
            upstreamSubscriptions: switchboard.upstreamCount,
            messagesIn: switchboard.messagesIn,
            messagesOut: switchboard.messagesOut,
            bufferedOutbound: switchboard.budget.outbound,
            bufferedInbound: switchboard.budget.inbound,
            retained: switchboard.retainedBytes,
            bufferLimit: switchboard.budget.limit
        )
    }

    /// The `status` answer (docs/protocol.md).
    func statusPayload(wholeURLs: Bool) -> ByteBuffer {
        var report = reportOnLoop
        report.health = laneHealth(identities: wholeURLs)
        return report.json(wholeURLs: wholeURLs)
    }

    /// The Prometheus text exposition (docs/metrics.md). On the loop.
    package func metricsText() -> [UInt8] {
        metrics.render(reportOnLoop)
    }

    /// The one-line status operators see (sd_notify STATUS=).
    package var statusLineOnLoop: String { reportOnLoop.line }

    func statusChanged() {
        guard !run.statusScheduled else { return }
        run.statusScheduled = true
        eventLoop.execute {
            self.run.statusScheduled = false
            self.hooks.statusChanged?(self.statusLineOnLoop)
        }
    }

    /// One carrier's event, in the journal (with `GQLMUX_CONNECTION=`, its index in the pool)
    /// and the metrics.
    private func transportEvent(_ event: TransportEvent, lane: UpstreamRegistry.Label, connection: Int) {
        eventLoop.assertInEventLoop()
        guard let carriers = upstreams.lane(lane.id)?.carriers else { return }
        var fields = ["GQLMUX_UPSTREAM": lane.upstream]
        if let identity = lane.identity { fields["GQLMUX_IDENTITY"] = identity }
        UpstreamEventLog(events: events.adding(fields), metrics: metrics)
            .record(event, lane: lane.id, connection: connection, context: carriers.eventContextOnLoop(connection: connection))
        if let roundTrip = view.transportEvent(event, lane: lane.id, connection: connection, now: NIODeadline.now().uptimeNanoseconds) {
            metrics.pingAnswered(upstream: lane.upstream, after: roundTrip)
        }
        if case .stateChanged = event { statusChanged() }
    }
}

package struct DaemonError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

extension ServerBootstrap {
    /// A listener that accepts nobody until `autoRead` is set (``Daemon/start()`` does so once
    /// the daemon's state is whole); connections wait in the backlog meanwhile.
    func acceptingLater() -> ServerBootstrap {
        serverChannelOption(.autoRead, value: false)
    }
}

/// Where the carriers' updates go: the switchboard, set once the daemon has made it (it is made
/// after the registry it sends through). Held strongly until the upstreams are shut down
/// (`Daemon.shutDownUpstreams`), then let go, which ends the cycle switchboard → registry →
/// carriers → sink.
///
/// Not weak: a weak reference gives the switchboard a side table, and then every retain and
/// release of it, several per upstream message, takes the runtime's slow path (6.5 % of
/// gqlmuxd's time with one subscriber; `Switchboard` has no weak reference now).
///
/// `@unchecked Sendable` — safe because `switchboard` is set in `Daemon.init`, before any carrier
/// can run (the upstream starts in `start()`, on the loop, after init returns), and afterwards
/// read and cleared only in ``deliver(_:_:)``, ``readEnded()`` and ``disconnect()``, which assert
/// the daemon's loop.
private final class CarrierSink: @unchecked Sendable {
    private let eventLoop: any EventLoop
    var switchboard: Switchboard?

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func deliver(_ id: OperationID, _ update: OperationUpdate) {
        eventLoop.assertInEventLoop()
        switchboard?.upstreamUpdate(id, update)
    }

    /// An upstream read was all delivered: its results are written now.
    func readEnded() {
        eventLoop.assertInEventLoop()
        switchboard?.upstreamReadEnded()
    }

    /// Updates after this reach no one.
    func disconnect() {
        eventLoop.assertInEventLoop()
        switchboard = nil
    }
}
