import GQLMuxConfiguration
import GQLMuxVocabulary
import GraphQLTransportWS
import LocalEndpoint
import LocalProtocol
import Multiplexing
import NIOCore
import RequestValidation
import ResultDelivery
import Upstream

/// The multiplexer core's I/O side: it feeds the core client and upstream events, one at a
/// time, and performs its actions: an operation opened or cancelled on the carrier the core
/// placed it on (through the registry of upstreams), the journal, the counters, refusals. The
/// core owns every fact about an operation, its placement included, under one ``OperationID``
/// that the carriers use too. What reaches clients goes through the ``Fanout``, which delivers
/// and does nothing else.
///
/// `@unchecked Sendable` — safe because it is used only on the daemon's event loop: from
/// `ClientSession` handlers and transport callbacks of channels on that loop; every entry point
/// (`subscribe`, `complete`, `clientGone`, `shutDown`, the carriers' sink) asserts it.
final class Switchboard: @unchecked Sendable {
    typealias Core = Fanout.Core

    /// The message of every `SHUTTING_DOWN` the daemon sends.
    static let shuttingDownMessage = "gqlmuxd is shutting down"

    /// The upstream side (the daemon's registry of upstreams): operations are opened and
    /// cancelled there, where the core placed them. The switchboard does not own it.
    private let upstream: any UpstreamOperations
    let eventLoop: any EventLoop
    /// The core itself; changed through ``changing(_:)``, which writes the fan-out's run first,
    /// and asked through ``reading(_:)``, which writes nothing.
    private var multiplexer: Core
    /// Where results and messages reach clients.
    let fanout: Fanout
    let events: DaemonEvents
    let metrics: DaemonMetrics
    /// Shared with the fan-out: an event that arrives while another is handled waits.
    private let turn: OneAtATime
    /// The drain's waits for every answer (``noAnswerPending(within:)``), each with its limit.
    private var answerWaiters: [(promise: EventLoopPromise<Void>, limit: Scheduled<Void>)] = []
    private(set) var messagesIn = 0
    /// Each upstream operation's figures for the operator's view (`operations`).
    private(set) var stats: [Core.OperationID: OperationStats] = [:]
    /// When each upstream operation was opened: seconds of the loop's clock since this
    /// switchboard was made (4 bytes an operation: an idle subscription's only cost here).
    private var openedAt: [Core.OperationID: UInt32] = [:]
    /// The loop's clock and Unix time (ms) when this switchboard was made.
    let madeAt = (loop: NIODeadline.now().uptimeNanoseconds, unixMs: ClientSession.unixMilliseconds())
    /// Counts the core's changes (operations opened, joined, left, told a state): a table made
    /// of the core is current while it stays the same.
    private(set) var changes = 0
    /// When each lane last had a result (the loop's clock, ns): `status` reads it per lane.
    private(set) var lastResultOfLane: [LaneID: UInt64] = [:]

    /// `count` results of operation `id` were written at `nanoseconds`: once per run.
    private func noteResults(_ count: Int, of id: Core.OperationID, at nanoseconds: UInt64) {
        guard let lane = reading({ $0.lane(of: id) }) else { return }
        stats[id, default: OperationStats()].noteRun(count, at: nanoseconds)
        lastResultOfLane[lane] = nanoseconds
    }

    private func forgetFigures(of id: Core.OperationID) {
        stats[id] = nil
        openedAt[id] = nil
    }

    /// When operation `id` was opened on the loop's clock (ns, to the second).
    func openedAtLoop(_ id: Core.OperationID) -> UInt64? {
        openedAt[id].map { madeAt.loop &+ UInt64($0) * 1_000_000_000 }
    }

    /// When operation `id` was opened, in Unix seconds; nil when it is not known.
    func startedAt(_ id: Core.OperationID) -> Double? {
        openedAt[id].map { Double(madeAt.unixMs) / 1_000 + Double($0) }
    }
    /// Results written to clients (the fan-out counts them).
    var messagesOut: Int { fanout.messagesOut }
    /// What the clients' unwritten bytes may take (the fan-out's budget too).
    let budget: MemoryBudget
    /// `[subscriptions] replay_last`: a joiner's replay when its own request does not say.
    var replayLast: Bool

    /// Changes the core once the results of the fan-out's run are written: every change comes
    /// after the results that arrived before, as if each had been written when it arrived (a
    /// run's subscribers are the core's as the run began). The one place a change writes to
    /// sockets.
    @inline(__always)
    private func changing<T>(_ body: (inout Core) throws -> T) rethrows -> T {
        fanout.writeRun()
        return try body(&multiplexer)
    }

    /// Asks the core, in place, and writes nothing: what a question answers does not depend on
    /// the run not yet written (it changes no operation, subscriber or limit). In place because,
    /// read as `multiplexer.question`, a method of the core (another module's struct in a class)
    /// was asked of a copy: every one of its collections retained and released, for each
    /// upstream message.
    @inline(__always)
    private func reading<T>(_ body: (inout Core) -> T) -> T { body(&multiplexer) }

    /// Writes the results of this turn's run now, before the caller writes something else to
    /// clients that must come after them (the answer to a client's request, a refusal, a
    /// shut-down's last words, a restart's hand-over): the explicit step where a pending run is
    /// written outside a change.
    func writePendingResults() {
        eventLoop.assertInEventLoop()
        fanout.writeRun()
    }

    /// - Parameter upstream: where operations are sent and cancelled. Their updates come back
    ///   through ``upstreamUpdate(_:_:)``.
    init(
        eventLoop: any EventLoop,
        events: DaemonEvents,
        metrics: DaemonMetrics,
        configuration: DaemonConfiguration,
        upstream: any UpstreamOperations,
        budget: MemoryBudget,
        lanes: [LaneID: UpstreamLayout] = [:]
    ) {
        let turn = OneAtATime()
        self.turn = turn
        self.eventLoop = eventLoop
        self.events = events
        self.metrics = metrics
        self.replayLast = configuration.replayLast
        var multiplexer = Core(maxOperationsPerClient: configuration.limits.maxOperationsPerClient, layout: configuration.upstreamLayout)
        for (lane, layout) in lanes { multiplexer.setLayout(layout, of: lane) }
        self.multiplexer = multiplexer
        self.upstream = upstream
        self.budget = budget
        self.fanout = Fanout(eventLoop: eventLoop, budget: budget, turn: turn)
        // A run's last result is kept for replays, as far as the budget has room.
        fanout.runWritten = { [unowned self] id, last, count in
            self.multiplexer.remember(id, last, budget: self.budget.room)
            self.noteResults(count, of: id, at: self.fanout.runAt)
        }
        turn.whenIdle = { [unowned self] in
            if !self.answerWaiters.isEmpty { self.answersMaybeSettled() }
        }
    }

    /// An update of upstream operation `id`, from whichever carrier holds it (the carriers'
    /// sink). On the loop.
    func upstreamUpdate(_ id: Core.OperationID, _ update: OperationUpdate) {
        eventLoop.assertInEventLoop()
        handle(.upstream(update, id))
    }

    /// An upstream read's results have all arrived: they are written now, framed once as the
    /// run they make, rather than at the end of the loop turn, so a result that came alone
    /// waits for nothing else the loop turn does. While another event is handled (`turn`, one
    /// event at a time: a read our own write caused mid-step), the end of the loop turn writes
    /// them. With several upstream connections read in one loop turn, a client may be written
    /// once per read instead of once per loop turn.
    func upstreamReadEnded() {
        eventLoop.assertInEventLoop()
        guard !turn.isBusy else { return }
        fanout.flushNow()
    }

    /// A reload's new limits and layout (the daemon applies the carriers' part to them).
    func apply(_ configuration: DaemonConfiguration) {
        replayLast = configuration.replayLast
        changing { $0.maxOperationsPerClient = configuration.limits.maxOperationsPerClient }
    }

    /// Lane `lane` takes new operations placed by `layout` (a new identity's lane, or a reload).
    func setLayout(_ layout: UpstreamLayout, of lane: LaneID) {
        eventLoop.assertInEventLoop()
        changing { $0.setLayout(layout, of: lane) }
    }

    /// Lane `lane` is gone (a reload removed its upstream, or its last client left): each of its
    /// operations ends with `failure` for every subscriber.
    func endLane(_ lane: LaneID, _ failure: TransportFailure) {
        eventLoop.assertInEventLoop()
        lastResultOfLane[lane] = nil
        serially { perform(changing { $0.endLane(lane, failure) }) }
    }

    /// Each lane's upstream operations and local operations reading them; with one lane, the
    /// totals (no pass over the operations: `STATUS=` asks at every change).
    func countsByLane(single lane: LaneID?) -> [LaneID: (upstream: Int, local: Int)] {
        if let lane { return [lane: (upstreamCount, localCount)] }
        return reading { $0.countsByLane }
    }

    /// Upstream operations open (as of the last event handled: reading it writes nothing).
    var upstreamCount: Int { multiplexer.upstreamCount }
    /// Bytes of latest results kept for replays (counted in the memory budget), as of the last
    /// event handled.
    var retainedBytes: Int { multiplexer.retainedBytes }

    /// Drops every latest result kept for replays (the budget needs the room).
    func forgetLastResults() { _ = changing { $0.forgetLastResults() } }
    /// Local operations open, as of the last event handled.
    var localCount: Int { multiplexer.localCount }

    // MARK: - Events in

    /// Whether `session` may start an operation named `localID` (checked before its payload is
    /// parsed, so a duplicate id is named as such): nil when it may.
    func admission(session: ClientSession, localID: String) -> Core.Refusal? {
        eventLoop.assertInEventLoop()
        return reading { $0.admission(client: ObjectIdentifier(session), localID: localID) }
    }

    /// A local `subscribe` that passed validation. Its refusals, if any, answer `session`.
    /// `resumingSince`: the operation was carried over a restart from the previous process,
    /// whose client was told `reconnecting` at that instant.
    func subscribe(_ request: SubscribeRequest, session: ClientSession, localID: String, resumingSince: Instant? = nil, lane: LaneID = .primary) {
        eventLoop.assertInEventLoop()
        let delivery = Fanout.Delivery(writer: session.writer, prefix: session.framing.prefix(id: localID))
        let key = request.kind == .subscription ? DedupKey(request.dedupKey) : nil
        serially {
            let actions = changing {
                $0.subscribe(
                    client: ObjectIdentifier(session),
                    localID: localID,
                    kind: request.kind,
                    key: key,
                    payload: request.payload,
                    tag: delivery,
                    replay: request.options.replayLast ?? replayLast,
                    snapshot: request.snapshotPayload,
                    resumingSince: resumingSince,
                    now: resumingSince == nil ? nil : .loopNow,
                    lane: lane
                )
            }
            perform(actions, asker: session, lane: lane)
        }
    }

    /// What the `clients` verb shows of `session`: how many operations it has open and on
    /// which lanes. Read in place: asking writes nothing to any client.
    func view(of session: ClientSession) -> (operations: Int, lanes: Set<LaneID>) {
        eventLoop.assertInEventLoop()
        let client = ObjectIdentifier(session)
        return reading { ($0.operationCount(of: client), $0.lanes(of: client)) }
    }

    /// Every upstream operation with its figures, oldest first (the `operations` verb). Reads
    /// the core in place: nothing is written to clients by asking. Figures of operations the
    /// core no longer has are dropped here.
    func operationRows() -> [(summary: Core.Summary, stats: OperationStats?)] {
        eventLoop.assertInEventLoop()
        let summaries = reading { $0.summaries }
        if stats.count > summaries.count || openedAt.count > summaries.count {
            let live = Set(summaries.map(\.id))
            stats = stats.filter { live.contains($0.key) }
            openedAt = openedAt.filter { live.contains($0.key) }
        }
        return summaries.map { ($0, stats[$0.id]) }
    }

    /// A local `complete`.
    func complete(session: ClientSession, localID: String) {
        eventLoop.assertInEventLoop()
        serially { perform(changing { $0.complete(client: ObjectIdentifier(session), localID: localID) }) }
    }

    /// The session closed or failed: its operations lose their subscriber. During a delivery
    /// (a client cut by its own write) this waits until the delivery is over.
    func clientGone(_ session: ClientSession) {
        eventLoop.assertInEventLoop()
        handle(.clientGone(session))
    }

    /// What a restart carries of `session`: its subscriptions (never a query or mutation).
    func subscriptions(of session: ClientSession) -> [Core.CarriedSubscription] {
        eventLoop.assertInEventLoop()
        return reading { $0.subscriptions(of: ObjectIdentifier(session)) }
    }

    /// The lanes of every operation `session` has open.
    func lanes(of session: ClientSession) -> Set<LaneID> {
        eventLoop.assertInEventLoop()
        return reading { $0.lanes(of: ObjectIdentifier(session)) }
    }

    /// The local ids of every operation `session` has open.
    func openOperations(of session: ClientSession) -> [String] {
        eventLoop.assertInEventLoop()
        return reading { $0.localIDs(of: ObjectIdentifier(session)) }
    }

    /// Whether `session` waits for a query's or mutation's answer.
    func awaitsAnswer(_ session: ClientSession) -> Bool {
        eventLoop.assertInEventLoop()
        return reading { $0.hasSingleOperation(ObjectIdentifier(session)) }
    }

    /// The daemon stops: every local operation gets `SHUTTING_DOWN`.
    func shutDown() {
        eventLoop.assertInEventLoop()
        serially { perform(changing { $0.shutDown() }) }
    }

    // MARK: - One event at a time

    /// What reaches the switchboard from outside while it may be busy: an upstream operation's
    /// update, or a session that ended.
    enum Event {
        case upstream(OperationUpdate, Core.OperationID)
        case clientGone(ClientSession)
    }

    /// Handles `event` now, or, when it arrives while another is being handled (a slow client
    /// cut by its own write in the middle of a delivery, a transport's update while an action is
    /// performed), after that one (``OneAtATime``).
    func handle(_ event: Event) {
        guard !turn.isBusy else { return turn.later { self.process(event) } }
        turn.run { process(event) }
    }

    /// Runs `body` as the one thing being handled, then whatever arrived meanwhile, in order.
    private func serially(_ body: () -> Void) { turn.run(body) }

    // MARK: - Waiting for answers

    /// Completes once no query or mutation of any client waits for its answer, or when `limit`
    /// has passed, whichever is first (a restart's drain waits on it).
    func noAnswerPending(within limit: TimeAmount) -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        guard multiplexer.hasAnySingleOperation else { return eventLoop.makeSucceededVoidFuture() }
        let promise = eventLoop.makePromise(of: Void.self)
        answerWaiters.append((promise, eventLoop.scheduleTask(in: limit) { promise.succeed() }))
        return promise.futureResult
    }

    private func answersMaybeSettled() {
        guard !multiplexer.hasAnySingleOperation else { return }
        let waiters = answerWaiters
        answerWaiters = []
        for waiter in waiters {
            waiter.limit.cancel()
            waiter.promise.succeed()
        }
    }

    private func process(_ event: Event) {
        switch event {
        case .upstream(let update, let id): upstream(update, id)
        case .clientGone(let session): perform(changing { $0.clientGone(ObjectIdentifier(session)) })
        }
    }

    private func upstream(_ update: OperationUpdate, _ id: Core.OperationID) {
        eventLoop.assertInEventLoop()
        switch update {
        case .next(let payload):
            messagesIn += 1
            // The hot path: the result joins the fan-out's run, written to every subscriber at
            // the end of the turn, or before a change to the core or another write to a client.
            // Asking the core writes nothing.
            let plainly = reading { $0.deliversPlainly || !($0.isSnapshot(id) || $0.isHolding(id)) }
            guard !plainly else {
                return fanout.append(payload, of: id, subscribers: self.reading { $0.subscribers(of: id) })
            }
            noteResults(1, of: id, at: NIODeadline.now().uptimeNanoseconds)
            // Delivered at once, after the results batched before it.
            writePendingResults()
            if reading({ $0.isSnapshot(id) }) { return perform(changing { $0.snapshotAnswered(id, payload) }) }
            // Some subscribers wait for their snapshot: the others get it now, theirs is held.
            let waiting = reading { $0.waiting(on: id) }
            fanout.deliver(payload, to: reading { $0.subscribers(of: id) }) { !waiting.contains($0.key) }
            perform(changing { $0.hold(id, payload) })
            changing { $0.remember(id, payload, budget: budget.room) }
        case .state(let state):
            if stats[id] != nil || OperationStats.counts(state) {
                stats[id, default: OperationStats()].stateChanged(to: state, at: NIODeadline.now().uptimeNanoseconds)
            }
            perform(changing { $0.upstreamState(id, state, now: .loopNow) })
        case .finished(let finish):
            perform(changing { $0.upstreamFinished(id, finish) })
        case .carrierFull:
            perform(changing { $0.carrierFull(id) })
        }
    }

    // MARK: - Actions out

    /// Performs the core's actions in order. `asker`: the session whose `subscribe` is being
    /// handled; the core refuses only in answer to one, so refusals go to it.
    private func perform(_ actions: [Core.Action], asker: ClientSession? = nil, lane askedLane: LaneID = .primary) {
        if !actions.isEmpty { changes &+= 1 }
        for action in actions {
            switch action {
            case .open(let id, let kind, let payload, let placement, let first, let lane):
                if openedAt[id] == nil { openedAt[id] = UInt32(clamping: (NIODeadline.now().uptimeNanoseconds &- madeAt.loop) / 1_000_000_000) }
                open(id, kind: kind, payload: payload, on: placement, first: first, lane: lane)
            case .joined(let id, let subscriber, let state, let count):
                fanout.tell(subscriber, .state(id: subscriber.localID, LocalOperationState(state), gapMs: nil), flush: true)
                events.emit(
                    .subscribed,
                    [
                        "GQLMUX_OPERATION_ID": "\(id)", "GQLMUX_LOCAL_ID": subscriber.localID, "GQLMUX_SHARED": "true",
                        "GQLMUX_UPSTREAM": upstreamName(of: id),
                    ],
                    message: "operation \(subscriber.localID) joined upstream subscription \(id) (\(count) subscribers)"
                )
            case .resumed(let id, let subscriber, let count):
                events.emit(
                    .subscribed,
                    [
                        "GQLMUX_OPERATION_ID": "\(id)", "GQLMUX_LOCAL_ID": subscriber.localID, "GQLMUX_SHARED": "true", "GQLMUX_RESUMED": "true",
                        "GQLMUX_UPSTREAM": upstreamName(of: id),
                    ],
                    message: "operation \(subscriber.localID), carried over the restart, joined upstream subscription \(id) (\(count) subscribers)"
                )
            case .close(let id, let placement, let lane):
                forgetFigures(of: id)
                upstream.cancelOnLoop(id, on: placement, lane: lane)
                events.emit(
                    .completed,
                    ["GQLMUX_OPERATION_ID": "\(id)", "GQLMUX_REASON": "last subscriber left", "GQLMUX_UPSTREAM": upstream.upstreamName(of: lane) ?? "?"],
                    message: "upstream operation \(id) completed: last subscriber left"
                )
            case .tellState(let subscriber, let state, let gap):
                let gapMs = gap.map { Int($0.nanoseconds / 1_000_000) }
                fanout.tell(subscriber, .state(id: subscriber.localID, LocalOperationState(state), gapMs: gapMs))
            case .replay(let subscriber, let payload):
                fanout.deliverMarked(payload, .replayed, to: subscriber)
            case .snapshot(let subscriber, let payload):
                fanout.deliverMarked(payload, .snapshot, to: subscriber)
            case .deliverHeld(let subscriber, let payload):
                fanout.deliverHeld(payload, to: subscriber)
            case .finish(let subscriber, let finish):
                fanout.tell(subscriber, Self.message(finish, localID: subscriber.localID))
            case .finished(let id, let finish, let count, let lane):
                forgetFigures(of: id)
                finished("\(id)", finish, subscribers: count, upstream: upstream.upstreamName(of: lane) ?? "?")
            case .refuse(_, let localID, let refusal):
                assert(asker != nil, "a refusal answers a subscribe")
                if let asker { refuse(asker, localID, refusal, lane: askedLane) }
            case .shutDown(let subscriber):
                let error = SessionMessage.error(id: subscriber.localID, .local(code: .shuttingDown, message: Self.shuttingDownMessage))
                if fanout.tell(subscriber, error) { metrics.errorSent(.shuttingDown) }
            }
        }
    }

    /// Sends operation `id` on the carrier the core placed it on.
    private func open(_ id: Core.OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement, first: Core.Subscriber, lane: LaneID) {
        guard upstream.openOnLoop(id, kind: kind, payload: payload, on: placement, lane: lane) else {
            // The layout names only carriers the daemon has (both follow the configuration).
            assertionFailure("no carrier for \(placement)")
            let failure = TransportFailure.connectionLost(reason: "no upstream carrier for this operation")
            return perform(changing { $0.upstreamFinished(id, .error(.transport(failure))) })
        }
        var fields = [
            "GQLMUX_OPERATION_ID": "\(id)", "GQLMUX_LOCAL_ID": first.localID, "GQLMUX_OPERATION_KIND": "\(kind)",
            "GQLMUX_TRANSPORT": upstream.carrierName(at: placement, lane: lane) ?? "?",
            "GQLMUX_UPSTREAM": upstream.upstreamName(of: lane) ?? "?",
        ]
        switch placement {
        case .connection(let index): fields["GQLMUX_CONNECTION"] = "\(index)"
        case .http: fields["GQLMUX_HTTP"] = "true"
        case .stream: break
        }
        events.emit(.subscribed, fields, message: "operation \(first.localID) sent upstream as \(kind) \(id)")
    }

    /// The name of the upstream of live operation `id`, for the journal.
    private func upstreamName(of id: Core.OperationID) -> String {
        multiplexer.lane(of: id).flatMap { upstream.upstreamName(of: $0) } ?? "?"
    }

    /// Answers a refused `subscribe` with the local error that names why.
    func refuse(_ session: ClientSession, _ localID: String, _ refusal: Core.Refusal, lane: LaneID = .primary) {
        // After the results that arrived before the request (a client's request has written
        // them already; a subscription carried over a restart is refused outside one).
        writePendingResults()
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
        case .upstreamFull:
            let limits = reading { $0.layout(of: lane) } ?? UpstreamLayout()
            if case .streams(let limit) = limits.subscriptions {
                events.emit(
                    .limitExceeded,
                    session.fields(["GQLMUX_LIMIT": "max_streams", "GQLMUX_UPSTREAM": upstream.upstreamName(of: lane) ?? "?"]),
                    message: "max_streams (\(limit)) upstream streams are open; subscription refused"
                )
                return session.sendError(id: localID, code: LocalErrorCode.limitExceeded, message: "max_streams (\(limit)) upstream streams are open")
            }
            events.emit(
                .limitExceeded,
                session.fields(["GQLMUX_LIMIT": "max_connections", "GQLMUX_UPSTREAM": upstream.upstreamName(of: lane) ?? "?"]),
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

    private func finished(_ upstreamID: String, _ finish: OperationFinish, subscribers: Int, upstream name: String) {
        if case .error(let error) = finish {
            var fields = ["GQLMUX_OPERATION_ID": upstreamID, "GQLMUX_UPSTREAM": name]
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
                ["GQLMUX_OPERATION_ID": upstreamID, "GQLMUX_REASON": "upstream completed", "GQLMUX_UPSTREAM": name],
                message: "upstream operation \(upstreamID) completed by the server"
            )
        }
    }

    /// How an operation's end reaches its subscriber `localID`.
    static func message(_ finish: OperationFinish, localID: String) -> SessionMessage {
        switch finish {
        case .completed, .cancelled:
            return .complete(id: localID)
        case .error(.upstream(let payload)):
            return .error(id: localID, .upstream(errors: payload))
        case .error(.transport(let failure)):
            let local = localError(failure)
            return .error(id: localID, .local(code: local.code, message: local.message, extra: local.extra))
        }
    }

    /// The transport's failure in the local protocol's words (docs/protocol.md).
    static func localError(_ failure: TransportFailure) -> (code: LocalErrorCode, message: String, extra: [SessionError.Extension]) {
        switch failure {
        case .connectionLost(let reason):
            return (LocalErrorCode.connectionLost, reason, [])
        case .upstreamClosed(let message, let closeCode, let closeReason):
            var extra: [SessionError.Extension] = []
            if let closeCode { extra.append(.init("closeCode", json: "\(closeCode)")) }
            extra.append(.init("closeReason", json: jsonString(closeReason)))
            return (LocalErrorCode.upstreamClosed, message, extra)
        case .shutDown:
            return (LocalErrorCode.shuttingDown, shuttingDownMessage, [])
        case .upstreamRemoved(let name):
            return (LocalErrorCode.unknownUpstream, "the upstream '\(name)' was removed from the configuration", [])
        }
    }
}

extension Instant {
    /// The loop's clock: how long a stream was down, when a log limit's second began.
    static var loopNow: Instant { Instant(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds)) }
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
