import GQLMuxVocabulary
import NIOCore

extension TransportStateMachine {
    /// Adds an operation and sends it when the connection allows.
    /// - Parameters:
    ///   - kind: subscriptions are re-sent after every reconnect; queries and mutations never.
    ///   - id: the operation's id, given by the caller (the multiplexer core); it names the
    ///     operation in every `.operation` action.
    ///   - payload: the request object (`query`, `variables`, `operationName`, `extensions`) as JSON bytes.
    package mutating func subscribe(id: OperationID, kind: OperationKind, payload: ByteBuffer, now: Instant) -> [TransportAction] {
        guard operations[id] == nil else {
            assertionFailure("operation \(id) opened twice")
            return []
        }
        var actions: [TransportAction] = []
        if phase == .shutDown {
            actions.append(.operation(id: id, .finished(.error(.transport(.shutDown)))))
            return actions
        }
        let wireID = makeWireID(id)
        operations[id] = Operation(wireID: wireID, kind: kind, payload: payload, state: .pending, sequence: nextSequenceNumber(), sentOn: nil)
        byWireID[wireID] = id
        if !kind.survivesReconnect { singleDeadlines.add(id, deadline: now + options.operationTimeout) }
        switch phase {
        case .connected(var c):
            c.idleCloseAt = nil
            phase = .connected(c)
            send(id, generation: c.generation, now: now, into: &actions)
        case .paused:
            setState(id, .paused, into: &actions, force: true)
        case .idle, .failed:
            actions.append(.operation(id: id, .state(.pending)))
            resetFailures()
            beginConnect(now: now, into: &actions)
        case .connecting, .awaitingAck, .backingOff:
            actions.append(.operation(id: id, .state(.pending)))
        case .shutDown:
            break
        }
        return actions
    }

    /// The caller no longer wants operation `id`: `complete` goes upstream if it was sent.
    package mutating func complete(id: OperationID, now: Instant) -> [TransportAction] {
        guard let op = operations[id] else { return [] }
        var actions: [TransportAction] = []
        if case .connected(let c) = phase, op.sentOn == c.generation {
            append(.complete(id: op.wireID), generation: c.generation, into: &actions)
        }
        finish(id, .cancelled, into: &actions)
        scheduleIdleCloseIfUnused(now: now, into: &actions)
        return actions
    }

    /// Queries and mutations past `operationTimeout` end with `CONNECTION_LOST`; one that was
    /// sent is stopped upstream first.
    mutating func expireSingles(now: Instant, into actions: inout [TransportAction]) {
        let due = singleDeadlines.due(now: now)
        guard !due.isEmpty else { return }
        let reason = "no result within operation_timeout (\(options.operationTimeout.seconds)s); the operation was not retried"
        for id in due {
            if case .connected(let c) = phase, let op = operations[id], op.sentOn == c.generation {
                append(.complete(id: op.wireID), generation: c.generation, into: &actions)
            }
            finish(id, .error(.transport(.connectionLost(reason: reason))), into: &actions)
        }
        scheduleIdleCloseIfUnused(now: now, into: &actions)
    }

    // MARK: - Helpers shared by the lifecycle

    mutating func beginConnect(now: Instant, into actions: inout [TransportAction]) {
        let gen = bumpGeneration()
        setPhase(.connecting(generation: gen, deadline: now + options.connectTimeout), .connecting(attempt: currentAttempt), into: &actions)
        actions.append(.connect(generation: gen))
    }

    /// A connection failed before its ack: the backoff grows.
    mutating func attemptFailed(closeCode: CloseCode?, cause: DisconnectCause, now: Instant, into actions: inout [TransportAction]) {
        recordFailure()
        scheduleRetry(closeCode: closeCode, cause: cause, now: now, into: &actions)
    }

    /// An acknowledged connection was lost.
    mutating func dropped(closeCode: CloseCode?, cause: DisconnectCause, now: Instant, into actions: inout [TransportAction]) {
        actions.append(.event(.disconnected(closeCode: closeCode, reason: cause.description)))
        connectionLost(into: &actions)
        recordFailure()
        scheduleRetry(closeCode: closeCode, cause: cause, now: now, into: &actions)
    }

    private mutating func scheduleRetry(closeCode: CloseCode?, cause: DisconnectCause, now: Instant, into actions: inout [TransportAction]) {
        if options.lazy && operations.isEmpty {
            setPhase(.idle, .idle, into: &actions)
            return
        }
        if let delay = options.backoff.delay(attempt: currentAttempt, random: randomValue()) {
            setPhase(.backingOff(until: now + delay), .reconnecting(attempt: currentAttempt, delay: delay, cause: cause), into: &actions)
            return
        }
        let reason =
            options.backoff.initial == nil
            ? "\(cause); reconnection is disabled"
            : "\(cause); gave up after \(options.backoff.maxAttempts) attempts"
        for id in sortedIDs() {
            finish(id, .error(.transport(.connectionLost(reason: reason))), into: &actions)
        }
        setPhase(.failed, .failed(closeCode: closeCode, reason: reason), into: &actions)
    }

    /// The current connection is gone: subscriptions wait for the next one, sent queries and
    /// mutations end with `CONNECTION_LOST` (never replayed).
    mutating func connectionLost(into actions: inout [TransportAction]) {
        for id in sortedIDs() {
            guard let op = operations[id] else { continue }
            if op.kind.survivesReconnect {
                operations[id]?.sentOn = nil
                if op.state == .active { setState(id, .reconnecting, into: &actions) }
            } else if op.sentOn != nil {
                finish(id, .error(.transport(.connectionLost(reason: "upstream connection lost; the operation was not retried"))), into: &actions)
            }
        }
    }

    /// Ends queries and mutations that are in flight or queued (pause).
    mutating func terminateSingles(_ failure: TransportFailure, into actions: inout [TransportAction]) {
        for id in sortedIDs() where operations[id]?.kind.survivesReconnect == false {
            finish(id, .error(.transport(failure)), into: &actions)
        }
        for id in operations.keys { operations[id]?.sentOn = nil }
    }

    /// A fatal close code (or a graphql-ws `connection_error`, `closeCode` nil): every operation
    /// ends with `UPSTREAM_CLOSED`, no reconnection until a resume, reload or new subscribe.
    mutating func failAll(closeCode: CloseCode?, reason: String, into actions: inout [TransportAction]) {
        actions.append(.event(.disconnected(closeCode: closeCode, reason: reason)))
        let message =
            closeCode.map { "upstream closed the connection with \($0)" + (reason.isEmpty ? "" : ": \(reason)") }
            ?? "upstream refused the connection: \(reason)"
        for id in sortedIDs() {
            finish(id, .error(.transport(.upstreamClosed(message: message, closeCode: closeCode, closeReason: reason))), into: &actions)
        }
        setPhase(.failed, .failed(closeCode: closeCode, reason: reason), into: &actions)
    }

    /// The server acknowledged connection `gen`. The attempt counter is NOT reset here: only
    /// once the connection has stayed up for `healthyAfter` (an upstream that acks and fails at
    /// once must see the backoff grow). Operations charged with a close wait on probation.
    mutating func acknowledged(generation gen: Int, payload: ByteBuffer?, now: Instant, into actions: inout [TransportAction]) {
        let nextPing = options.pingInterval > .zero && (wire.hasClientPing || measuresWithPingFrames) ? now + options.pingInterval : nil
        var connected = Connected(generation: gen, nextPing: nextPing)
        if options.dialect == .appSync {
            // AppSync says how long it may stay silent; it sends `ka` well within that.
            connected.silenceLimit = AppSyncWire.connectionTimeout(payload) ?? Self.appSyncDefaultTimeout
            connected.pongDeadline = now + connected.silenceLimit!
        }
        if options.healthyAfter > .zero { connected.healthyAt = now + options.healthyAfter }
        setPhase(.connected(connected), .connected, into: &actions)
        if options.healthyAfter <= .zero { markHealthy(generation: gen) }
        actions.append(.event(markConnected()))
        let held = Set(probation.joined())
        for id in sortedIDs() where operations[id]?.sentOn == nil && operations[id]?.state != .paused && !held.contains(id) {
            send(id, generation: gen, now: now, into: &actions)
        }
        startNextTrial(now: now, into: &actions)
        scheduleIdleCloseIfUnused(now: now, into: &actions)
    }

    /// A lazy transport with nothing to do closes after `lazyCloseTimeout`.
    mutating func scheduleIdleCloseIfUnused(now: Instant, into actions: inout [TransportAction]) {
        guard options.lazy, operations.isEmpty else { return }
        switch phase {
        case .connected(var c):
            if options.lazyCloseTimeout <= .zero {
                closeConnected(generation: c.generation, code: 1000, reason: "idle", into: &actions)
                setPhase(.idle, .idle, into: &actions)
            } else if c.idleCloseAt == nil {
                c.idleCloseAt = now + options.lazyCloseTimeout
                phase = .connected(c)
            }
        case .connecting, .awaitingAck, .backingOff:
            closeCurrent(code: 1000, reason: "idle", into: &actions)
            setPhase(.idle, .idle, into: &actions)
        default:
            break
        }
    }

    /// Sends `message` on connection `gen` in its protocol; a message the protocol lacks is skipped.
    func append(_ message: ClientMessage, generation gen: Int, into actions: inout [TransportAction]) {
        let encoded = options.dialect == .appSync ? AppSyncWire.encode(message, authorize: appSyncAuthorizer) : wire.encode(message)
        guard let frame = encoded else { return }
        actions.append(.send(generation: gen, frame))
    }

    /// Closes an acknowledged connection; a graphql-ws one says `connection_terminate` first.
    func closeConnected(generation gen: Int, code: CloseCode, reason: String, into actions: inout [TransportAction]) {
        if code == 1000 { append(.connectionTerminate, generation: gen, into: &actions) }
        actions.append(.close(generation: gen, code: code, reason: reason))
    }

    mutating func closeCurrent(code: CloseCode, reason: String, into actions: inout [TransportAction]) {
        switch phase {
        case .connecting(let gen, _): actions.append(.abort(generation: gen))
        case .awaitingAck(let gen, _): actions.append(.close(generation: gen, code: code, reason: reason))
        case .connected(let c): closeConnected(generation: c.generation, code: code, reason: reason, into: &actions)
        default: break
        }
    }

    mutating func send(_ id: OperationID, generation gen: Int, now: Instant, onTrial: Bool? = nil, into actions: inout [TransportAction]) {
        guard let op = operations[id] else { return }
        append(.subscribe(id: op.wireID, payload: op.payload), generation: gen, into: &actions)
        operations[id]?.sentOn = gen
        operations[id]?.sentAt = now
        operations[id]?.onTrial = onTrial ?? (op.sentAt == nil)
        setState(id, .active, into: &actions, force: true)
    }

    mutating func setState(_ id: OperationID, _ state: OperationState, into actions: inout [TransportAction], force: Bool = false) {
        guard let op = operations[id], force || op.state != state else { return }
        operations[id]?.state = state
        actions.append(.operation(id: id, .state(state)))
    }

    mutating func finish(_ id: OperationID, _ finish: OperationFinish, into actions: inout [TransportAction]) {
        singleDeadlines.remove(id)
        guard let op = operations.removeValue(forKey: id) else { return }
        byWireID[op.wireID] = nil
        actions.append(.operation(id: id, .finished(finish)))
    }

    /// The server refused operation `id` for its connection's cap: forgotten here, told as
    /// ``OperationUpdate/carrierFull`` so that it is placed on another connection.
    mutating func refusedAsFull(_ id: OperationID, into actions: inout [TransportAction]) {
        singleDeadlines.remove(id)
        guard let op = operations.removeValue(forKey: id) else { return }
        byWireID[op.wireID] = nil
        actions.append(.operation(id: id, .carrierFull))
    }

    mutating func setPhase(_ newPhase: Phase, _ state: ConnectionState, into actions: inout [TransportAction]) {
        phase = newPhase
        guard state != connectionState else { return }
        connectionState = state
        actions.append(.event(.stateChanged(state)))
    }

    /// Ids in the order the operations were added, so re-subscribes keep their order.
    func sortedIDs() -> [OperationID] {
        operations.sorted { $0.value.sequence < $1.value.sequence }.map(\.key)
    }
}
