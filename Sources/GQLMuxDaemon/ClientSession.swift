import EndpointServer
import GQLMuxVocabulary
import GraphQLTransportWS
import Handover
import LocalEndpoint
import LocalProtocol
import Multiplexing
import NIOCore
import RequestValidation
import ResultDelivery
import SystemdSupport

#if canImport(Glibc)
import Glibc
#endif

/// One local client connection: its operations, its admin verbs, its lanes and credentials,
/// and its share of the memory budget. It reads requests (``ClientRequest``) from the wire in
/// front of it and names no wire: results and messages leave through its ``ResultWriter``,
/// which frames them as that wire takes them.
///
/// `@unchecked Sendable` — safe because NIO calls a channel handler only on its channel's
/// loop (the daemon's), and the daemon and fan-out call it from that loop too: `send` and
/// `fail` check `eventLoop.assertInEventLoop()` (debug builds and tests); the hot path writes
/// to its writer only from the fan-out's deliveries, whose entry (`Switchboard.upstream`)
/// makes the same check, so a delivery pays for no check of its own.
package final class ClientSession: ChannelInboundHandler, EndpointSession, @unchecked Sendable {
    package typealias InboundIn = ClientRequest
    package typealias OutboundOut = ByteBuffer

    /// The control plane (admin verbs, status, counting sessions); the daemon owns this
    /// session's channel, so it outlives the session.
    private unowned let host: any SessionHost
    private let switchboard: Switchboard
    private let budget: MemoryBudget
    private let events: DaemonEvents
    private let metrics: DaemonMetrics
    let channel: any Channel
    var eventLoop: any EventLoop { channel.eventLoop }
    private(set) var credentials: PeerCredentials?
    var name = ""
    /// Its way out: results and messages, framed as its wire takes them.
    let writer: ResultWriter
    /// Once closing (error, slow consumer, shutdown, handover) nothing more is written.
    private var closing: Bool {
        get { writer.closed }
        set { writer.closed = newValue }
    }
    /// Whether this session is ending (a restart does not carry it).
    var isClosing: Bool { closing }

    /// Its share of the memory budget for what it has not finished sending (a partial line or
    /// frame): such a client cannot be carried over a restart.
    package var inbound: (any InboundBudget)?

    /// Whether it holds part of a line or frame it has not finished sending.
    var holdsPartialInput: Bool { (inbound?.held ?? 0) > 0 }

    /// The handler that owns this client's wire: what the online restart asks whether, and
    /// as what, the client can be carried.
    package var wire: (any CarriedConnection)?

    /// How it came in, as whoever built its pipeline says: the control plane's to read (which
    /// listener, whether its peer has credentials, how long a cut client may drain).
    let arrival: Arrival

    private var opened = false

    /// What it presents for upstreams with `identity = "client"`, and the identity lanes it
    /// holds. Changed through ``present(_:)`` and the lane methods only.
    private(set) var presentedCredentials = ClientCredentials()
    package var presented: PresentedCredential { presentedCredentials.presented }

    /// Records that this client uses identity lane `lane`, given it while presenting
    /// `presented` (nil: a lane that credential does not pick); true the first time.
    func holdLane(_ lane: LaneID, presented: PresentedCredential?) -> Bool {
        presentedCredentials.hold(lane, presented: presented)
    }

    /// Replaces what this client presents (``ClientCredentials/present(_:limit:budget:inUse:)``);
    /// the lanes of the credential it replaces are let go of where none of its operations use them.
    package func present(_ credential: PresentedCredential) {
        release(presentedCredentials.present(credential, limit: host.credentialLimit, budget: budget, inUse: { self.switchboard.lanes(of: self) }))
    }

    package func presentPayload(_ payload: [UInt8]?) {
        guard presentedCredentials.refusal == nil else { return }
        present(PresentedCredential(payload: payload, headers: presented.headers))
    }

    /// Lets go of every held lane none of this client's open operations uses.
    func releaseUnusedLanes() {
        release(presentedCredentials.releaseUnused(inUse: { self.switchboard.lanes(of: self) }, budget: budget))
    }

    /// Lets go of everything it holds upstream (it leaves, or is refused at adoption).
    func releaseAll() {
        release(presentedCredentials.releaseAll(budget: budget))
    }

    private func release(_ lanes: [LaneID]) {
        for lane in lanes { host.releaseLane(lane) }
    }

    /// How results reach this client (``ResultWriter/framing``): set by the endpoint's handlers
    /// before a subscribe.
    package var framing: NextFraming {
        get { writer.framing }
        set { writer.framing = newValue }
    }

    init(host: any SessionHost, switchboard: Switchboard, events: DaemonEvents, metrics: DaemonMetrics, channel: any Channel, arrival: Arrival) {
        self.host = host
        self.switchboard = switchboard
        self.budget = switchboard.budget
        self.events = events
        self.metrics = metrics
        self.channel = channel
        self.arrival = arrival
        writer = ResultWriter(output: arrival.output, channel: channel, budget: switchboard.budget, spare: switchboard.fanout.spare)
    }

    // MARK: - Channel events

    /// An endpoint client's session is added once its kind is known, after the channel is active.
    package func handlerAdded(context: ChannelHandlerContext) {
        writer.context = context
        if context.channel.isActive { open(context.channel) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) { writer.context = nil }

    package func channelActive(context: ChannelHandlerContext) {
        open(context.channel)
        context.fireChannelActive()
    }

    private func open(_ channel: any Channel) {
        guard !opened else { return }
        opened = true
        credentials = arrival.hasPeerCredentials ? PeerCredentials.of(channel) : nil
        process = credentials.flatMap { PeerCredentials.processName(pid: $0.pid) }
        host.sessionOpened(self)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        dropOperations()
        budget.outboundChanged(by: writer.releaseBuffered())
        releaseAll()  // also when it was refused as it opened: what it took since goes too
        host.sessionClosed(self)
        context.fireChannelInactive()
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { budget.outboundChanged(by: writer.refreshBuffered()) }
        if !context.channel.isWritable, !closing {
            writer.queuedNow()
            events.emit(.slowConsumer, fields(), message: "client fell behind by more than client_buffer_bytes; disconnected")
            fail(code: LocalErrorCode.slowConsumer, "client did not read fast enough (client_buffer_bytes exceeded)", force: true)
            budget.scheduleTrim()
        }
        context.fireChannelWritabilityChanged()
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        // A request is answered after the results that arrived before it (asking the core
        // writes nothing: this is where a batched run is written for a client's request).
        switchboard.writePendingResults()
        switch unwrapInboundIn(data) {
        case .connectionInit(let clientName, let upstream):
            name = clientName ?? ""
            if let upstream { present(upstream) }
            send(host.connectionAck())
        case .subscribe(let id, let request):
            subscribe(id: id, request)
        case .complete(let id):
            switchboard.complete(session: self, localID: id)
            host.statusChanged()
        case .ping(let payload):
            send(.pong(payload: payload))
        case .pong:
            break
        case .status(let id):
            // Upstream URLs whole (a query string may hold a key) to an admin only.
            send(.status(id: id, payload: host.statusPayload(wholeURLs: host.isAdmin(credentials))))
        case .metrics(let id):
            send(.metrics(id: id, text: String(decoding: host.metricsText(), as: UTF8.self)))
        case .table(let table, let id):
            send(.table(table == .clients ? .clients : .operations, id: id, payload: host.table(table, for: credentials)))
        case .admin(let verb, let id, let upstream):
            admin(verb, id: id, upstream: upstream)
        case .invalid(let reason):
            protocolError(reason)
        case .refused(let code, let message, let logged):
            if let logged { events.emit(.clientProtocolError, fields(), message: logged) }
            fail(code: code, message)
        }
    }

    // MARK: - Verbs

    /// - Parameter resumed: the operation was carried over a restart: the resnapshot query it
    ///   had (already in its upstream form) and when its client was told `reconnecting`.
    private func subscribe(
        id: String,
        _ parsed: Result<SubscribeRequest, SubscribeRequest.Invalid>,
        resumed: (snapshot: ByteBuffer?, since: Instant)? = nil
    ) {
        // A duplicate id and the per-client limit are named before the document's faults.
        if let refusal = switchboard.admission(session: self, localID: id) {
            return switchboard.refuse(self, id, refusal)
        }
        var request: SubscribeRequest
        switch parsed {
        case .success(let parsed): request = parsed
        case .failure(let error): return sendError(id: id, code: error.code, message: error.message)
        }
        if let resumed { request.snapshotPayload = resumed.snapshot }
        let lane: LaneID
        switch host.lane(upstream: request.upstream, for: self) {
        case .success(let chosen): lane = chosen
        case .failure(let refusal): return sendError(id: id, code: refusal.code, message: refusal.message)
        }
        switchboard.subscribe(request, session: self, localID: id, resumingSince: resumed?.since, lane: lane)
        host.statusChanged()
    }

    /// Subscribes again to what this client had open in the previous process (a restart
    /// carried its connection): as resuming since `since`, when it was told `reconnecting`.
    /// A subscription the current limits refuse gets its error, as a new one would.
    /// Each is made again with the credential it was made with: the latest (presented
    /// already) or the record's for its lane, presented for it, and the latest presented again
    /// after.
    func resume(_ subscriptions: [HandoverState.Subscription], laneCredentials earlier: [HandoverState.Client.Credential] = [], since: Instant) {
        eventLoop.assertInEventLoop()
        func again(_ subscription: HandoverState.Subscription) {
            let parsed = SubscribeRequest.parsed(ByteBuffer(string: subscription.payload), limits: host.documentLimits).forUpstream(subscription.upstream)
            subscribe(id: subscription.id, parsed, resumed: (subscription.snapshot.map { ByteBuffer(string: $0) }, since))
        }
        for subscription in subscriptions where subscription.credential == nil { again(subscription) }
        let byCredential = Dictionary(grouping: subscriptions.filter { $0.credential.map { $0 < earlier.count } == true }) { $0.credential! }
        guard !byCredential.isEmpty else { return }
        let latest = presented
        let latestRefusal = presentedCredentials.refusal
        for (index, group) in byCredential.sorted(by: { $0.key < $1.key }) {
            present(PresentedCredential(payload: earlier[index].payload.map { Array($0.utf8) }, headers: earlier[index].headers))
            for subscription in group { again(subscription) }
        }
        present(latest)
        if latest.isEmpty, let latestRefusal { presentedCredentials.keepRefusal(latestRefusal) }
    }

    /// The handover failed after this client was set aside for it: it is closed as in a stop.
    func shutDownAfterHandover() {
        closing = false
        shutDown()
    }

    private func admin(_ verb: ClientRequest.AdminVerb, id: String?, upstream: String?) {
        guard host.isAdmin(credentials) else {
            sendError(id: id, code: LocalErrorCode.forbidden, message: "'\(verb.rawValue)' is an admin verb; this peer is not an admin")
            return
        }
        if upstream != nil, verb != .pause, verb != .resume {
            return sendError(id: id, code: LocalErrorCode.badRequest, message: "'\(verb.rawValue)' applies to the whole daemon, not to one upstream")
        }
        switch verb {
        case .pause, .resume:
            if let refusal = verb == .pause ? host.pause(upstream: upstream) : host.resume(upstream: upstream) {
                sendError(id: id, code: refusal.code, message: refusal.message)
            } else {
                send(.ok(id: id))
            }
        case .restart:
            if let refusal = host.restart() {
                sendError(id: id, code: LocalErrorCode.badRequest, message: refusal)
            } else {
                send(.ok(id: id))
            }
        case .reload:
            host.reload().whenComplete { result in
                switch result {
                case .success: self.send(.ok(id: id))
                case .failure(let error): self.sendError(id: id, code: LocalErrorCode.badRequest, message: "reload failed: \(error)")
                }
            }
        }
    }

    // MARK: - Writing

    /// An `error` for one operation (or for the connection when `id` is nil), counted by code.
    func sendError(id: String?, code: LocalErrorCode, message: String, flush: Bool = true) {
        guard !closing else { return }
        metrics.errorSent(code)
        send(.error(id: id, .local(code: code, message: message)), flush: flush)
    }

    /// Tells the client `message`, after the results batched before it; flushed unless the
    /// caller batches (a wire that takes values gets it at once).
    func send(_ message: SessionMessage, flush: Bool = true) {
        eventLoop.assertInEventLoop()
        budget.outboundChanged(by: writer.send(message, flush: flush))
    }

    // MARK: - The operator's view (`clients`)

    /// The daemon's number for this connection, unique in this process (set when it opens).
    var number = 0
    /// When it first connected (Unix time, ms): a client carried over a restart keeps its own.
    var connectedAtMs = ClientSession.unixMilliseconds()
    /// When it opened in this process (the loop's clock, ns): where its rates start.
    let openedAt = NIODeadline.now().uptimeNanoseconds
    /// Online restarts it was carried across.
    var restarts = 0
    /// Its process's name (`/proc/PID/comm` when it connected); nil without peer credentials.
    private(set) var process: String?

    /// Everything written for it that it has not read: NIO's queue and its socket's (the
    /// `clients` verb's `queuedBytes`; kept as the peak if it is one). The kernel counts its
    /// bookkeeping too (several times the bytes of small writes), so never more than was sent.
    func unreadNow() -> Int {
        let unread = min(writer.queuedNow() + (closing ? 0 : KernelQueue.bytes(of: channel)), writer.bytesSent)
        writer.notePeak(unread)
        return unread
    }

    /// Its kind as operators name it: the wire it speaks now.
    var kindName: String { writer.kindName }

    static func unixMilliseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now.tv_sec * 1_000 + now.tv_nsec / 1_000_000
    }

    /// Sends an `error` without id and closes this client only.
    func protocolError(_ message: String) {
        events.emit(.clientProtocolError, fields(), message: message)
        fail(code: LocalErrorCode.badRequest, message)
    }

    /// Ends the session with an error line. `force` closes at once (the buffer is full).
    func fail(code: LocalErrorCode, _ message: String, force: Bool = false) {
        eventLoop.assertInEventLoop()
        guard !closing else { return }
        dropOperations()
        metrics.errorSent(code)
        if code == LocalErrorCode.slowConsumer {
            metrics.slowConsumerCut()
            host.slowConsumerCut(self)  // its own buffer or the memory budget: both count for its app
        }
        if !force { writer.flush() }
        closing = true
        let channel = self.channel
        // Half-close after the error line and keep draining input for a moment: closing a Unix
        // socket with unread input makes the peer's read fail with ECONNRESET before it sees
        // the error line.
        let written = channel.eventLoop.makePromise(of: Void.self)
        writer.sendLast(.error(id: nil, .local(code: code, message: message)), promise: written)
        written.futureResult.whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
        let grace: TimeAmount = force ? arrival.drainAfterCut : .milliseconds(500)
        channel.eventLoop.scheduleTask(in: grace) { channel.close(promise: nil) }
    }

    /// The connection goes to the next process (a restart under systemd): everything batched is
    /// written, then nothing more. The future completes once NIO has handed all of it to the
    /// kernel, so no frame or line is left half-written.
    func handOver() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        return writer.writeOut()
    }

    /// The daemon stops, or this client cannot be carried over a restart: every operation it
    /// still has open hears `SHUTTING_DOWN` first, in its own protocol (a WebSocket client's
    /// running query gets its `error` before the close 1001; an HTTP stream its final errors),
    /// then the client is told and closed. After the fan-out's own shut-down nothing is open
    /// here any more and only the client is told.
    func shutDown() {
        eventLoop.assertInEventLoop()
        // The results that arrived before come first.
        switchboard.writePendingResults()
        for id in switchboard.openOperations(of: self) {
            sendError(id: id, code: LocalErrorCode.shuttingDown, message: Switchboard.shuttingDownMessage, flush: false)
        }
        fail(code: LocalErrorCode.shuttingDown, Switchboard.shuttingDownMessage)
    }

    private func dropOperations() {
        switchboard.clientGone(self)
    }

    /// `pid 123, uid 1000, "name"` for log messages.
    var peerDescription: String {
        var parts: [String] = []
        if let credentials { parts += ["pid \(credentials.pid)", "uid \(credentials.uid)"] }
        if !name.isEmpty { parts.append("\"\(name)\"") }
        return parts.isEmpty ? "unknown peer" : parts.joined(separator: ", ")
    }

    func fields(_ extra: [String: String] = [:]) -> [String: String] {
        var f = extra
        if let credentials {
            f["GQLMUX_PEER_PID"] = "\(credentials.pid)"
            f["GQLMUX_PEER_UID"] = "\(credentials.uid)"
        }
        if !name.isEmpty { f["GQLMUX_CLIENT_NAME"] = name }
        if let kind = arrival.logKind { f["GQLMUX_CLIENT_KIND"] = kind }
        return f
    }
}
