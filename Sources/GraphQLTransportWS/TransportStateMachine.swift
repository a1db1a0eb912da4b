import GQLMuxVocabulary
import NIOCore

/// The graphql-transport-ws client as a pure state machine: events in, actions out.
///
/// It owns the connection phase, every timer deadline and the operation table. The I/O
/// layer feeds it what happened (with the current time), performs the returned actions,
/// and calls ``tick(now:)`` at ``nextDeadline``. Stale events from an older connection
/// are recognised by their generation and ignored.
package struct TransportStateMachine {
    enum Phase: Equatable {
        case idle
        case connecting(generation: Int, deadline: Instant)
        case awaitingAck(generation: Int, deadline: Instant)
        case connected(Connected)
        case backingOff(until: Instant)
        case paused
        case failed
        case shutDown
    }

    struct Connected: Equatable {
        var generation: Int
        var nextPing: Instant?
        var pongDeadline: Instant?
        var idleCloseAt: Instant?
        /// When this connection counts as healthy: the attempt counter resets, trials end.
        var healthyAt: Instant?
        /// The probation group sent on this connection, and when it has passed its trial.
        var trial: [OperationID]?
        var probationAt: Instant?
        /// graphql-ws: the server has sent a `ka`, so silence now means a dead peer.
        var keepAliveSeen = false
        /// AppSync: the ack's `connectionTimeoutMs`; silence this long means a dead peer.
        var silenceLimit: Duration?
    }

    /// What the wire needs of one operation: its id on the wire, what to (re)send, and the
    /// facts blame and replay are decided by. Whom it is for is not here: the multiplexer core
    /// owns that under the same ``OperationID``.
    struct Operation {
        /// The id in `subscribe`/`next`/`complete` frames (see ``OperationID``).
        var wireID: String
        var kind: OperationKind
        var payload: ByteBuffer
        var state: OperationState
        var sequence: Int
        /// The connection the subscribe was sent on, if any.
        var sentOn: Int?
        /// When it was last sent, for blame.
        var sentAt: Instant?
        /// Sent for the first time or in a probation trial: a close soon after may be its fault
        /// (see `TransportStateMachine+Quarantine.swift`).
        var onTrial = true
    }

    /// Replaced whole by a reload (`apply`); each timer reads it when it starts.
    package private(set) var options: TransportOptions
    private let random: () -> Double
    private let makeUUID: () -> String

    var phase: Phase = .idle
    package internal(set) var connectionState: ConnectionState = .idle
    /// The protocol of the current (or last) connection, as the server selected it.
    package internal(set) var wire: WireProtocol = .transportWS
    /// AppSync: authorizes every `start` on the current connection with its credentials.
    var appSyncAuthorizer: AppSyncAuthorizer?
    /// AppSync's documented `connectionTimeoutMs` when an ack names none (5 minutes).
    static let appSyncDefaultTimeout: Duration = .milliseconds(300_000)
    var operations: [OperationID: Operation] = [:]
    /// Inbound frames name an operation by its wire id.
    var byWireID: [String: OperationID] = [:]
    /// The number of the current (or last) connection.
    package internal(set) var generation = 0
    private var nextSequence = 0
    /// Failures since the last ack; the next retry's number.
    private var failures = 0
    private var everConnected = false
    var started = false
    /// When each query or mutation ends if no result came (`operationTimeout`); subscriptions
    /// have none.
    var singleDeadlines = SingleDeadlines<OperationID>()
    /// Charged operations in groups, tried one group at a time after each ack (see `TransportStateMachine+Quarantine.swift`).
    var probation: [[OperationID]] = []
    /// Completed reconnects, for the `status` verb.
    package private(set) var reconnects = 0

    /// - Parameters:
    ///   - options: timeouts, backoff, laziness, id style.
    ///   - random: jitter source returning values in `0..<1`.
    ///   - makeUUID: id source for `operation_ids = "uuid"`.
    package init(
        options: TransportOptions,
        random: @escaping () -> Double,
        makeUUID: @escaping () -> String
    ) {
        self.options = options
        self.random = random
        self.makeUUID = makeUUID
    }

    /// A reloaded configuration's options: timers and retries started from now on use them;
    /// a deadline already set keeps its time.
    package mutating func apply(_ options: TransportOptions) {
        self.options = options
    }

    /// The retry number of the current or next connect in this outage (the first connect counts as 1).
    var currentAttempt: Int { max(failures, 1) }
    mutating func recordFailure() { failures += 1 }
    mutating func resetFailures() { failures = 0 }
    mutating func bumpGeneration() -> Int {
        generation += 1
        return generation
    }
    mutating func nextSequenceNumber() -> Int {
        nextSequence += 1
        return nextSequence
    }
    func randomValue() -> Double { random() }
    /// The wire id of operation `id`: the id itself, or a UUID (`operation_ids`).
    func makeWireID(_ id: OperationID) -> String {
        switch options.operationIDs {
        case .sequential: id.description
        case .uuid: makeUUID()
        }
    }
    /// Records an ack and tells whether it was the first or a reconnect.
    mutating func markConnected() -> TransportEvent {
        defer { everConnected = true }
        if everConnected {
            reconnects += 1
            return .reconnected
        }
        return .connected
    }

    package var operationCount: Int { operations.count }
    package func state(of id: OperationID) -> OperationState? { operations[id]?.state }
    /// The id operation `id` has on the wire.
    package func wireID(of id: OperationID) -> String? { operations[id]?.wireID }

    /// The earlier of two optional instants.
    @inline(__always)
    private static func earlier(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }

    /// ``nextDeadline`` for an owner that keeps the machine in a class's property and asks
    /// after every message: `mutating` only so the machine is read where it lies. Through the
    /// getter, the caller copied the whole machine first (each of its collections retained and
    /// released: 3 % of a result's time through the transport).
    package mutating func nextDeadlineInPlace() -> Instant? { nextDeadline }

    /// The earliest instant at which ``tick(now:)`` has work to do.
    package var nextDeadline: Instant? {
        let connection: Instant?
        switch phase {
        case .connecting(_, let deadline), .awaitingAck(_, let deadline), .backingOff(let deadline):
            connection = deadline
        case .connected(let c):
            // No array: this runs for every message.
            connection = Self.earlier(Self.earlier(Self.earlier(c.nextPing, c.pongDeadline), Self.earlier(c.idleCloseAt, c.healthyAt)), c.probationAt)
        case .idle, .paused, .failed, .shutDown:
            connection = nil
        }
        guard let single = singleDeadlines.earliest else { return connection }
        return connection.map { min($0, single) } ?? single
    }

    // MARK: - Lifecycle commands

    /// Starts the transport: connects now unless `lazy` (or a subscribe made before the start
    /// already connects).
    package mutating func start(now: Instant) -> [TransportAction] {
        guard !started else { return [] }
        started = true
        var actions: [TransportAction] = []
        if phase == .idle && !options.lazy { beginConnect(now: now, into: &actions) }
        return actions
    }

    /// Closes the upstream (1000) and holds every subscription until ``resume(now:)``.
    package mutating func pause(now: Instant) -> [TransportAction] {
        guard phase != .paused, phase != .shutDown else { return [] }
        var actions: [TransportAction] = []
        closeCurrent(code: 1000, reason: "paused", into: &actions)
        terminateSingles(.connectionLost(reason: "upstream paused"), into: &actions)
        for id in sortedIDs() { setState(id, .paused, into: &actions) }
        setPhase(.paused, .paused, into: &actions)
        return actions
    }

    /// Leaves `paused` or `failed` and connects at once.
    package mutating func resume(now: Instant) -> [TransportAction] {
        switch phase {
        case .paused, .failed:
            var actions: [TransportAction] = []
            for id in sortedIDs() where operations[id]?.state == .paused { setState(id, .reconnecting, into: &actions) }
            resetFailures()
            beginConnect(now: now, into: &actions)
            return actions
        case .idle where started && !options.lazy:
            var actions: [TransportAction] = []
            beginConnect(now: now, into: &actions)
            return actions
        default:
            return []
        }
    }

    /// Applies new credentials: reconnects at once if connected or connecting, keeping every
    /// subscription; a paused transport stays paused.
    package mutating func reconnectNow(now: Instant) -> [TransportAction] {
        var actions: [TransportAction] = []
        switch phase {
        case .connected, .connecting, .awaitingAck:
            closeCurrent(code: 1000, reason: "reconnecting with new configuration", into: &actions)
            connectionLost(into: &actions)
            resetFailures()
            beginConnect(now: now, into: &actions)
        case .backingOff, .failed:
            resetFailures()
            beginConnect(now: now, into: &actions)
        case .idle:
            if started && (!options.lazy || !operations.isEmpty) { beginConnect(now: now, into: &actions) }
        case .paused, .shutDown:
            break
        }
        return actions
    }

    /// Graceful stop: `complete` for every live operation, close 1000, finish everything.
    package mutating func shutdown(now: Instant) -> [TransportAction] {
        guard phase != .shutDown else { return [] }
        var actions: [TransportAction] = []
        if case .connected(let c) = phase {
            for id in sortedIDs() where operations[id]?.sentOn == c.generation {
                append(.complete(id: operations[id]!.wireID), generation: c.generation, into: &actions)
            }
        }
        closeCurrent(code: 1000, reason: "shutting down", into: &actions)
        for id in sortedIDs() {
            finish(id, .error(.transport(.shutDown)), into: &actions)
        }
        setPhase(.shutDown, .shutDown, into: &actions)
        return actions
    }

    // MARK: - Timers

    /// Runs every timer whose deadline is at or before `now`.
    package mutating func tick(now: Instant) -> [TransportAction] {
        var actions: [TransportAction] = []
        expireSingles(now: now, into: &actions)
        switch phase {
        case .connecting(let gen, let deadline) where now >= deadline:
            actions.append(.abort(generation: gen))
            attemptFailed(closeCode: nil, cause: .connectTimeout(options.connectTimeout), now: now, into: &actions)
        case .awaitingAck(let gen, let deadline) where now >= deadline:
            actions.append(.close(generation: gen, code: 4408, reason: "Connection acknowledgement timeout"))
            attemptFailed(closeCode: nil, cause: .ackTimeout(options.ackTimeout), now: now, into: &actions)
        case .backingOff(let until) where now >= until:
            beginConnect(now: now, into: &actions)
        case .connected(var c):
            if let deadline = c.pongDeadline, now >= deadline {
                actions.append(.abort(generation: c.generation))
                let cause: DisconnectCause =
                    if let limit = c.silenceLimit {
                        .deadPeer(silence: limit, afterKeepAlive: true)
                    } else if wire.hasClientPing {
                        .deadPeer(silence: options.pongTimeout, afterKeepAlive: false)
                    } else {
                        .deadPeer(silence: options.pingInterval + options.pongTimeout, afterKeepAlive: true)
                    }
                dropped(closeCode: nil, cause: cause, now: now, into: &actions)
                return actions
            }
            if let at = c.idleCloseAt, now >= at {
                closeConnected(generation: c.generation, code: 1000, reason: "idle", into: &actions)
                setPhase(.idle, .idle, into: &actions)
                return actions
            }
            if let at = c.healthyAt, now >= at {
                c.healthyAt = nil
                phase = .connected(c)
                markHealthy(generation: c.generation)
            }
            if let at = c.probationAt, now >= at {
                trialPassed(now: now, into: &actions)
                guard case .connected(let updated) = phase else { return actions }
                c = updated
            }
            if let at = c.nextPing, now >= at {
                if wire.hasClientPing {
                    append(.ping(payload: nil), generation: c.generation, into: &actions)
                    if c.pongDeadline == nil { c.pongDeadline = now + options.pongTimeout }
                } else {
                    actions.append(.pingFrame(generation: c.generation))
                }
                actions.append(.event(.ping(received: false)))
                c.nextPing = now + options.pingInterval
                phase = .connected(c)
            }
        default:
            break
        }
        return actions
    }

    // MARK: - Connection events

    /// The WebSocket upgrade of connection `generation` succeeded.
    /// - Parameters:
    ///   - initPayload: the connecting payload read for this connect, if any.
    ///   - protocol: the subprotocol the server selected; this connection speaks it.
    ///   - authorizer: AppSync: authorizes each `start` (``AppSyncAuthorizer``).
    package mutating func connectionOpened(
        generation gen: Int,
        initPayload: ByteBuffer?,
        protocol selected: WireProtocol = .transportWS,
        authorizer: AppSyncAuthorizer? = nil,
        now: Instant
    ) -> [TransportAction] {
        guard case .connecting(gen, _) = phase else { return [] }
        let attempt = currentAttempt
        wire = selected
        appSyncAuthorizer = authorizer
        phase = .awaitingAck(generation: gen, deadline: now + options.ackTimeout)
        connectionState = .awaitingAck(attempt: attempt)
        var actions: [TransportAction] = []
        append(.connectionInit(payload: initPayload), generation: gen, into: &actions)
        actions.append(.event(.stateChanged(connectionState)))
        return actions
    }

    /// Connection `generation` could not be opened (refused, DNS, TLS, upgrade refused,
    /// subprotocol not selected, unreadable payload file).
    package mutating func connectionFailed(generation gen: Int, cause: String, now: Instant) -> [TransportAction] {
        guard case .connecting(gen, _) = phase else { return [] }
        var actions: [TransportAction] = []
        attemptFailed(closeCode: nil, cause: .network(cause), now: now, into: &actions)
        return actions
    }

    /// Connection `generation` was refused for its credentials before it opened (AppSync's
    /// upgrade answered 401 or 403): fatal like a 4403 close, so a wrong key never loops.
    package mutating func connectionRefused(generation gen: Int, reason: String) -> [TransportAction] {
        guard case .connecting(gen, _) = phase else { return [] }
        var actions: [TransportAction] = []
        failAll(closeCode: nil, reason: reason, into: &actions)
        return actions
    }

    /// Connection `generation` closed: a close frame (`code`), or a drop (`code` nil, seen as 1006).
    package mutating func connectionClosed(generation gen: Int, code: CloseCode?, reason: String, now: Instant) -> [TransportAction] {
        guard generation == gen else { return [] }
        var actions: [TransportAction] = []
        let cause: DisconnectCause = code.map { .closed(code: $0, reason: reason) } ?? .network(reason)
        if let code, code.isFatal {
            switch phase {
            case .connecting, .awaitingAck, .connected: break
            default: return []
            }
            failAll(closeCode: code, reason: reason, into: &actions)
            return actions
        }
        switch phase {
        case .connecting(gen, _), .awaitingAck(gen, _):
            attemptFailed(closeCode: code, cause: cause, now: now, into: &actions)
        case .connected(let c) where c.generation == gen:
            chargeBlame(generation: gen, closeCode: code, reason: reason, now: now, into: &actions)
            dropped(closeCode: code, cause: cause, now: now, into: &actions)
        default:
            break
        }
        return actions
    }

    /// A non-text frame arrived (WebSocket ping or pong): the peer is alive.
    package mutating func activity(generation gen: Int, now: Instant) {
        guard case .connected(var c) = phase, c.generation == gen else { return }
        c.pongDeadline = silenceDeadline(c, now: now)
        phase = .connected(c)
    }

    /// A WebSocket pong frame arrived. Where the protocol has no ping of its own (graphql-ws)
    /// it answers our ping frame: told as a pong, for its round trip, and nothing more, so a
    /// server whose library answers ping frames on its own while the server itself hangs is
    /// still found by its missing `ka`. Elsewhere it is a sign of life.
    package mutating func pongFrame(generation gen: Int, now: Instant) -> [TransportAction] {
        guard case .connected(let c) = phase, c.generation == gen else { return [] }
        guard measuresWithPingFrames else {
            activity(generation: gen, now: now)
            return []
        }
        return [.event(.pong(received: true))]
    }

    /// graphql-ws (not AppSync's dialect) has no client ping: WebSocket ping frames measure its
    /// round trip every `ping_interval`.
    var measuresWithPingFrames: Bool { !wire.hasClientPing && options.dialect != .appSync }

    /// After any inbound frame: graphql-transport-ws waits for the next ping's answer (none
    /// pending); graphql-ws, once the server has shown it sends `ka`, expects another frame
    /// within `ping_interval` (the keep-alive interval) plus `pong_timeout`.
    func silenceDeadline(_ c: Connected, now: Instant) -> Instant? {
        if let limit = c.silenceLimit { return now + limit }
        guard !wire.hasClientPing, c.keepAliveSeen, options.pingInterval > .zero else { return nil }
        return now + options.pingInterval + options.pongTimeout
    }

    /// A text message arrived on connection `generation`.
    package mutating func received(generation gen: Int, _ frame: ByteBuffer, now: Instant) -> [TransportAction] {
        let message: ServerMessage
        do {
            message = try options.dialect == .appSync ? AppSyncWire.parse(frame) : wire.parse(frame)
        } catch {
            return protocolViolation(generation: gen, error.reason, closeCode: error.closeCode, now: now)
        }
        return received(generation: gen, message, now: now)
    }

    /// The peer broke the protocol (malformed or binary frame): close 4400 and retry.
    /// - Parameter closeCode: 4400 for a malformed message, 1009 for one that is too big.
    package mutating func protocolViolation(
        generation gen: Int,
        _ reason: String,
        closeCode: CloseCode = 4400,
        now: Instant
    ) -> [TransportAction] {
        guard generation == gen else { return [] }
        var actions: [TransportAction] = []
        switch phase {
        case .awaitingAck(gen, _):
            actions.append(.close(generation: gen, code: closeCode, reason: String(reason.prefix(120))))
            attemptFailed(closeCode: closeCode, cause: .protocolViolation(reason), now: now, into: &actions)
        case .connected(let c) where c.generation == gen:
            actions.append(.close(generation: gen, code: closeCode, reason: String(reason.prefix(120))))
            dropped(closeCode: closeCode, cause: .protocolViolation(reason), now: now, into: &actions)
        default:
            break
        }
        return actions
    }

    private mutating func received(generation gen: Int, _ message: ServerMessage, now: Instant) -> [TransportAction] {
        var actions: [TransportAction] = []
        switch phase {
        case .awaitingAck(gen, _):
            switch message {
            case .connectionAck(let payload):
                acknowledged(generation: gen, payload: payload, now: now, into: &actions)
            case .ping(let payload):
                answerPing(payload, generation: gen, into: &actions)
            case .pong:
                actions.append(.event(.pong(received: true)))
            case .keepAlive:
                break
            case .connectionError(let payload):
                refused(generation: gen, payload, into: &actions)
            default:
                return protocolViolation(generation: gen, "message before connection_ack", now: now)
            }
        case .connected(var c) where c.generation == gen:
            if case .keepAlive = message { c.keepAliveSeen = true }
            c.pongDeadline = silenceDeadline(c, now: now)
            phase = .connected(c)
            switch message {
            case .keepAlive:
                actions.append(.event(.keepAlive))
            case .connectionAck, .started, .connectionNotice:
                break
            case .connectionError(let payload):
                refused(generation: gen, payload, into: &actions)
            case .next(let wireID, let payload):
                guard let id = byWireID[wireID], let op = operations[id], op.sentOn == gen else { break }
                actions.append(.operation(id: id, .next(payload)))
                if wire == .legacyWS && !op.kind.survivesReconnect {
                    // A query or mutation has one result. Legacy servers may never say
                    // `complete` after it (ariadne does not): the first `data` ends it.
                    append(.complete(id: wireID), generation: gen, into: &actions)
                    finish(id, .completed, into: &actions)
                    scheduleIdleCloseIfUnused(now: now, into: &actions)
                }
            case .error(let wireID, let payload):
                if let id = byWireID[wireID], operations[id]?.sentOn == gen {
                    if options.dialect == .appSync, AppSyncWire.isSubscriptionCap(payload) {
                        refusedAsFull(id, into: &actions)
                    } else {
                        finish(id, .error(.upstream(payload)), into: &actions)
                    }
                }
                scheduleIdleCloseIfUnused(now: now, into: &actions)
            case .complete(let wireID):
                if let id = byWireID[wireID], operations[id]?.sentOn == gen { finish(id, .completed, into: &actions) }
                scheduleIdleCloseIfUnused(now: now, into: &actions)
            case .ping(let payload):
                answerPing(payload, generation: gen, into: &actions)
            case .pong:
                actions.append(.event(.pong(received: true)))
            }
        default:
            break
        }
        return actions
    }

    /// A server `ping`, before or after the ack: told as an event and answered with a `pong`
    /// echoing its payload.
    private func answerPing(_ payload: ByteBuffer?, generation gen: Int, into actions: inout [TransportAction]) {
        actions.append(.event(.ping(received: true)))
        append(.pong(payload: payload), generation: gen, into: &actions)
    }

    /// graphql-ws `connection_error`: the server refused `connection_init` (a bad token, as a
    /// 4403 close is in the modern protocol). Fatal: state `failed` until resume or reload.
    private mutating func refused(generation gen: Int, _ payload: ByteBuffer?, into actions: inout [TransportAction]) {
        actions.append(.close(generation: gen, code: 1000, reason: "connection_error"))
        failAll(closeCode: nil, reason: "connection_error: " + Self.errorMessage(payload), into: &actions)
    }

    /// The `message` of a `connection_error` payload (an object, or a string), else the raw text.
    static func errorMessage(_ payload: ByteBuffer?) -> String {
        guard let payload else { return "no reason given" }
        let text = payload.withUnsafeReadableBytes { bytes -> String? in
            if let members = try? JSONScanner.scanObject(bytes),
                let message = members.first(where: { $0.key == "message" && $0.kind == .string })
            {
                return JSONScanner.decodeString(bytes, message.range)
            }
            return nil
        }
        return String((text ?? String(buffer: payload)).prefix(200))
    }
}
