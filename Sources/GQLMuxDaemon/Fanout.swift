import GraphQLTransportWS
import LocalProtocol
import Multiplexing
import NIOCore
import RequestValidation
import Upstream

/// The I/O side of the ``Multiplexer``: it feeds the core client and upstream events and performs
/// its actions (place or complete an upstream operation, write lines, log, count). The core
/// owns every registry of operations; this owns where each upstream operation lives on the
/// wire, the delivery of `next` frames and the once-per-loop-turn flush.
///
/// `@unchecked Sendable` — safe because it is used only on the daemon's event loop: from
/// `ClientSession` handlers and transport callbacks of channels on that loop; every entry point
/// (`subscribe`, `complete`, `clientGone`, `shutDown`, the transport handler) asserts it.
final class Fanout: @unchecked Sendable {
    typealias Core = Multiplexer<ObjectIdentifier, Delivery>

    /// The message of every `SHUTTING_DOWN` the daemon sends.
    static let shuttingDownMessage = "gqlmuxd is shutting down"

    /// Where one upstream operation lives: its carrier (a pooled WebSocket connection or
    /// `http_url`) and the carrier's id of it.
    private struct Placement {
        var carrier: any OperationCarrier
        var upstreamID = ""
    }

    let pool: ConnectionPool
    /// Queries and mutations go here when `[upstream] http_url` is set.
    var http: HTTPOperations?
    /// Subscriptions go here when `[upstream] transport` is `multipart` or `sse` (the pool
    /// then carries nothing).
    var streams: HTTPStreamTransport?
    private var core: Core
    private var placements: [Core.OperationID: Placement] = [:]
    let events: DaemonEvents
    let metrics: DaemonMetrics
    /// Sessions written to since the last flush, each once (see `ClientSession.awaitingFlush`).
    private var dirty: [ClientSession] = []
    private var flushScheduled = false
    /// An event is being handled; others wait in `waiting` (see `handle`).
    private var busy = false
    private var waiting: [Event] = []
    private(set) var messagesIn = 0
    private(set) var messagesOut = 0
    /// Unwritten bytes of all clients together, as last measured (see `MemoryBudget.swift`).
    var totalBuffered = 0
    /// `[limits] total_buffer_bytes`.
    var totalBufferBytes: Int
    /// Every live session, for the memory budget's search of the client furthest behind.
    var sessions: () -> [ClientSession] = { [] }
    var trimScheduled = false

    init(pool: ConnectionPool, events: DaemonEvents, metrics: DaemonMetrics, limits: DaemonConfiguration.Limits) {
        self.pool = pool
        self.events = events
        self.metrics = metrics
        self.totalBufferBytes = limits.totalBufferBytes
        self.core = Core(maxOperationsPerClient: limits.maxOperationsPerClient)
    }

    /// A reload's new limits.
    func apply(_ limits: DaemonConfiguration.Limits) {
        totalBufferBytes = limits.totalBufferBytes
        core.maxOperationsPerClient = limits.maxOperationsPerClient
    }

    var upstreamCount: Int { core.upstreamCount }
    var localCount: Int { core.localCount }

    // MARK: - Events in

    /// Whether `session` may start an operation named `localID` (checked before its payload is
    /// parsed, so a duplicate id is named as such): nil when it may.
    func admission(session: ClientSession, localID: String) -> Core.Refusal? {
        pool.eventLoop.assertInEventLoop()
        return core.admission(client: ObjectIdentifier(session), localID: localID)
    }

    /// A local `subscribe` that passed validation.
    func subscribe(_ request: SubscribeRequest, session: ClientSession, localID: String) {
        pool.eventLoop.assertInEventLoop()
        let delivery = Delivery(session: session, prefix: LocalEncode.nextPrefix(id: localID))
        let key = request.kind == .subscription ? request.dedupKey : nil
        serially {
            asking = (session, request.payload)
            defer { asking = nil }
            perform(core.subscribe(client: ObjectIdentifier(session), localID: localID, kind: request.kind, key: key, tag: delivery))
        }
    }

    /// A local `complete`.
    func complete(session: ClientSession, localID: String) {
        pool.eventLoop.assertInEventLoop()
        serially { perform(core.complete(client: ObjectIdentifier(session), localID: localID)) }
    }

    /// The session closed or failed: its operations lose their subscriber. During a delivery
    /// (a client cut by its own write) this waits until the delivery is over.
    func clientGone(_ session: ClientSession) {
        pool.eventLoop.assertInEventLoop()
        handle(.clientGone(session))
    }

    /// The daemon stops: every local operation gets `SHUTTING_DOWN`.
    func shutDown() {
        pool.eventLoop.assertInEventLoop()
        serially { perform(core.shutDown()) }
    }

    // MARK: - One event at a time

    /// What reaches the fan-out from outside while it may be busy: an upstream operation's
    /// update, or a session that ended.
    enum Event {
        case upstream(OperationUpdate, Core.OperationID)
        case clientGone(ClientSession)
    }

    /// Handles `event` now, or, when it arrives while another is being handled (a slow client
    /// cut by its own write in the middle of a delivery, a transport's update while an action is
    /// performed), after that one: the core is never entered while it is mid-iteration, and
    /// every list the fan-out walks stays as it was for the whole walk.
    func handle(_ event: Event) {
        guard !busy else {
            waiting.append(event)
            return
        }
        serially { process(event) }
    }

    /// Runs `body` as the one thing being handled, then whatever arrived meanwhile, in order.
    private func serially(_ body: () -> Void) {
        guard !busy else {
            body()  // a local request never arrives mid-event; if one did, it runs as before
            return
        }
        busy = true
        body()
        var next = 0
        while next < waiting.count {
            process(waiting[next])
            next += 1
        }
        waiting.removeAll(keepingCapacity: true)
        busy = false
    }

    private func process(_ event: Event) {
        switch event {
        case .upstream(let update, let id): upstream(update, id)
        case .clientGone(let session): perform(core.clientGone(ObjectIdentifier(session)))
        }
    }

    private func upstream(_ update: OperationUpdate, _ id: Core.OperationID) {
        pool.eventLoop.assertInEventLoop()
        switch update {
        case .next(let payload):
            // The hot path: the core's subscriber list read in place, no action values
            // (`Fanout+Delivery.swift`).
            messagesIn += 1
            let delivered = deliver(payload, to: core.subscribers(of: id))
            messagesOut += delivered
        case .state(let state):
            perform(core.upstreamState(id, state))
        case .finished(let finish):
            perform(core.upstreamFinished(id, finish))
        }
    }

    // MARK: - Actions out

    private func perform(_ actions: [Core.Action]) {
        for action in actions {
            switch action {
            case .open(let id, let kind, let first):
                open(id, kind: kind, payload: first)
            case .joined(let id, let subscriber, let state, let count):
                subscriber.tag.session.send(LocalEncode.state(id: subscriber.localID, LocalOperationState(state)))
                let upstreamID = placements[id]?.upstreamID ?? ""
                events.emit(
                    .subscribed,
                    ["GQLMUX_OPERATION_ID": upstreamID, "GQLMUX_LOCAL_ID": subscriber.localID, "GQLMUX_SHARED": "true"],
                    message: "operation \(subscriber.localID) joined upstream subscription \(upstreamID) (\(count) subscribers)"
                )
            case .close(let id):
                guard let placement = placements.removeValue(forKey: id) else { continue }
                placement.carrier.cancelOnLoop(id: placement.upstreamID)
                events.emit(
                    .completed,
                    ["GQLMUX_OPERATION_ID": placement.upstreamID, "GQLMUX_REASON": "last subscriber left"],
                    message: "upstream operation \(placement.upstreamID) completed: last subscriber left"
                )
            case .tellState(let subscriber, let state):
                subscriber.tag.session.send(LocalEncode.state(id: subscriber.localID, LocalOperationState(state)), flush: false)
                markDirty(subscriber.tag.session)
            case .finish(let subscriber, let finish):
                subscriber.tag.session.send(Self.encode(finish, localID: subscriber.localID), flush: false)
                markDirty(subscriber.tag.session)
            case .finished(let id, let finish, let count):
                finished(placements.removeValue(forKey: id)?.upstreamID ?? "", finish, subscribers: count)
            case .refuse(_, let localID, let refusal):
                // Refusals answer the `subscribe` being handled: its session asked.
                if let session = asking?.session { refuse(session, localID, refusal) }
            case .shutDown(let subscriber):
                subscriber.tag.session.sendError(
                    id: subscriber.localID,
                    code: LocalErrorCode.shuttingDown,
                    message: Self.shuttingDownMessage,
                    flush: false
                )
            }
        }
    }

    /// The `subscribe` being handled, set around `core.subscribe`: its session gets the
    /// refusals, its payload goes upstream on `open`.
    private var asking: (session: ClientSession, payload: ByteBuffer)?

    private func open(_ id: Core.OperationID, kind: OperationKind, payload first: Core.Subscriber) {
        guard let payload = asking?.payload else {
            // The core asks to open only while a `subscribe` is handled; keep it consistent anyway.
            assertionFailure("open outside subscribe")
            return perform(core.upstreamRefused(id))
        }
        guard let carrier = carrier(for: kind) else {
            perform(core.upstreamRefused(id))
            return
        }
        placements[id] = Placement(carrier: carrier)
        let handler: OperationHandler = { [weak self] update in self?.handle(.upstream(update, id)) }
        let upstreamID = carrier.openOnLoop(kind: kind, payload: payload, handler: handler)
        placements[id]?.upstreamID = upstreamID
        var fields = [
            "GQLMUX_OPERATION_ID": upstreamID, "GQLMUX_LOCAL_ID": first.localID, "GQLMUX_OPERATION_KIND": "\(kind)",
            "GQLMUX_TRANSPORT": carrier.carrierName,
        ]
        if let transport = carrier as? UpstreamTransport, let index = pool.index(of: transport) { fields["GQLMUX_CONNECTION"] = "\(index)" }
        if carrier is HTTPOperations { fields["GQLMUX_HTTP"] = "true" }
        events.emit(.subscribed, fields, message: "operation \(first.localID) sent upstream as \(kind) \(upstreamID)")
    }

    /// Where a new upstream operation goes, decided here only: queries and mutations to
    /// `http_url` when it is set; subscriptions to an HTTP stream when `transport` is
    /// `multipart` or `sse` (nil past `max_streams`), else to a pool connection with room
    /// (nil: the pool is full).
    private func carrier(for kind: OperationKind) -> (any OperationCarrier)? {
        if kind != .subscription, let http { return http }
        if let streams {
            // A stream carries subscriptions only; `http_url` (required with streams) takes the rest.
            return kind == .subscription && streams.hasRoomOnLoop ? streams : nil
        }
        return pool.transportForNewOperation()
    }

    /// Answers a refused `subscribe` with the local error that names why.
    func refuse(_ session: ClientSession, _ localID: String, _ refusal: Core.Refusal) {
        switch refusal {
        case .duplicateID:
            session.sendError(id: localID, code: LocalErrorCode.duplicateID, message: "operation id '\(localID)' is already in use")
        case .tooManyOperations(let limit):
            events.emit(
                .limitExceeded,
                session.fields(["GQLMUX_LIMIT": "max_operations_per_client"]),
                message: "max_operations_per_client reached (\(session.peerDescription))"
            )
            session.sendError(id: localID, code: LocalErrorCode.limitExceeded, message: "max_operations_per_client (\(limit)) reached")
        case .upstreamFull where streams != nil:
            let limit = streams?.maxStreamsOnLoop ?? 0
            events.emit(
                .limitExceeded,
                session.fields(["GQLMUX_LIMIT": "max_streams"]),
                message: "max_streams (\(limit)) upstream streams are open; subscription refused"
            )
            session.sendError(id: localID, code: LocalErrorCode.limitExceeded, message: "max_streams (\(limit)) upstream streams are open")
        case .upstreamFull:
            let limits = pool.limits
            events.emit(
                .limitExceeded,
                session.fields(["GQLMUX_LIMIT": "max_connections"]),
                message:
                    "every upstream connection holds max_operations_per_connection (\(limits.maxOperationsPerConnection)) and max_connections (\(limits.maxConnections)) are open"
            )
            session.sendError(
                id: localID,
                code: LocalErrorCode.limitExceeded,
                message:
                    "the upstream pool is full: \(limits.maxConnections) connections × \(limits.maxOperationsPerConnection) operations (max_connections, max_operations_per_connection)"
            )
        case .shuttingDown:
            session.sendError(id: localID, code: LocalErrorCode.shuttingDown, message: Self.shuttingDownMessage)
        }
    }

    private func finished(_ upstreamID: String, _ finish: OperationFinish, subscribers: Int) {
        if case .error(let error) = finish {
            var fields = ["GQLMUX_OPERATION_ID": upstreamID]
            var code: LocalErrorCode?  // nil: the server's GraphQL errors, passed through
            if case .transport(let failure) = error { code = Self.localError(failure).code }
            if let code { fields["GQLMUX_ERROR_CODE"] = code.rawValue }
            metrics.errorSent(code, count: subscribers)
            events.emit(
                .operationError,
                fields,
                message: "upstream operation \(upstreamID) ended with an error" + (fields["GQLMUX_ERROR_CODE"].map { " (\($0))" } ?? "")
            )
        } else if finish == .completed {
            events.emit(
                .completed,
                ["GQLMUX_OPERATION_ID": upstreamID, "GQLMUX_REASON": "upstream completed"],
                message: "upstream operation \(upstreamID) completed by the server"
            )
        }
    }

    static func encode(_ finish: OperationFinish, localID: String) -> ByteBuffer {
        switch finish {
        case .completed, .cancelled:
            return LocalEncode.complete(id: localID)
        case .error(.upstream(let payload)):
            return LocalEncode.message(.error, id: localID, payload: payload)
        case .error(.transport(let failure)):
            let local = localError(failure)
            return LocalEncode.error(id: localID, code: local.code, message: local.message, extra: local.extra)
        }
    }

    /// The transport's failure in the local protocol's words (docs/protocol.md).
    static func localError(_ failure: TransportFailure) -> (code: LocalErrorCode, message: String, extra: [(String, String)]) {
        switch failure {
        case .connectionLost(let reason):
            return (LocalErrorCode.connectionLost, reason, [])
        case .upstreamClosed(let message, let closeCode, let closeReason):
            var extra: [(String, String)] = []
            if let closeCode { extra.append(("closeCode", "\(closeCode)")) }
            extra.append(("closeReason", jsonString(closeReason)))
            return (LocalErrorCode.upstreamClosed, message, extra)
        case .shutDown:
            return (LocalErrorCode.shuttingDown, shuttingDownMessage, [])
        }
    }

    /// Flushes every session written since the last flush, once per loop turn.
    /// A flag test per delivery on the hot path, not a hash insert.
    func markDirty(_ session: ClientSession) {
        guard !session.awaitingFlush else { return }
        session.awaitingFlush = true
        dirty.append(session)
        guard !flushScheduled else { return }
        flushScheduled = true
        session.eventLoop.execute { self.flushDirty() }
    }

    private func flushDirty() {
        flushScheduled = false
        let sessions = dirty
        dirty.removeAll(keepingCapacity: true)
        var change = 0
        for session in sessions {
            session.awaitingFlush = false
            change += session.flush()
        }
        bufferedChanged(by: change)
    }
}

extension LocalOperationState {
    /// An upstream operation's state in the local protocol's words.
    init(_ state: OperationState) {
        switch state {
        case .pending: self = .pending
        case .active: self = .active
        case .reconnecting: self = .reconnecting
        case .paused: self = .paused
        }
    }
}
