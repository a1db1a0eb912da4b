import GQLMuxVocabulary
import JSONEnvelope
import NIOCore

/// The pure core of an HTTP streaming upstream (multipart or SSE): one stream per
/// subscription, each requested, kept alive by its bytes, lost and requested again with
/// backoff. Events in, actions out; the clock is injected (every event carries `now`), so
/// tests drive time by hand. The I/O layer performs the actions and calls ``tick(now:)`` at
/// ``nextDeadline``.
///
/// A stream's life:
/// ```
///  open ─► requesting ──200, stream type──► streaming ──result──► (next)
///             │  ▲                              │
///   5xx, network, no head within connectTimeout │ EOF without end, garbage, silence
///             ▼  │ backoff                      ▼ for heartbeatTimeout
///           waiting ◄───────────────────────────┘
///  401/403 anywhere: every stream ends (UPSTREAM_CLOSED), the upstream is `failed`
///  other 4xx, fatal errors part, `complete`, close delimiter: that stream ends
/// ```
/// Neither protocol can resume, so a lost stream is requested again from scratch and its
/// subscribers see `reconnecting`, then `active`.
package struct StreamMachine: Sendable {
    package struct Options: Sendable, Equatable {
        package var backoff = Backoff()
        /// From the request to the response head.
        package var connectTimeout: Duration = .seconds(10)
        /// No byte for this long: the stream is dead.
        package var heartbeatTimeout: Duration = .seconds(15)
        /// A stream up this long resets its backoff (`reconnect_reset_after`).
        package var healthyAfter: Duration = .seconds(10)
        package init() {}
    }

    package enum Action: Equatable, Sendable {
        /// POST stream `id`'s payload; its events carry `generation`.
        case request(id: OperationID, generation: Int, payload: ByteBuffer)
        /// Drop the request or stream `generation` of `id` (no event for it will matter).
        case abort(id: OperationID, generation: Int)
        case update(id: OperationID, OperationUpdate)
        case event(TransportEvent)
    }

    /// How a response began.
    package enum Head: Equatable, Sendable {
        /// 2xx with the stream's media type: bytes follow.
        case stream
        /// Not a stream: the whole body, read, with its status.
        case answer(status: Int, reason: String, body: ByteBuffer)
    }

    private enum Phase: Equatable, Sendable {
        case waiting(until: Instant)
        case requesting(generation: Int, since: Instant)
        case streaming(generation: Int, since: Instant, lastByte: Instant)
        case paused

        var generation: Int? {
            switch self {
            case .requesting(let generation, _), .streaming(let generation, _, _): generation
            case .waiting, .paused: nil
            }
        }
    }

    private struct Stream: Sendable {
        var payload: ByteBuffer
        var phase: Phase
        var state: OperationState
        /// Failed requests in a row (the backoff's attempt).
        var attempt = 0
        /// Why it waits to be requested again, and for how long.
        var cause: DisconnectCause?
        var delay: Duration = .zero
    }

    package private(set) var options: Options
    private var streams: [OperationID: Stream] = [:]
    private var order: [OperationID] = []
    private var nextGeneration = 0
    private var paused = false
    private var failure: String?
    private var isShutDown = false
    private var reported: ConnectionState = .idle
    private var everConnected = false
    private var random: @Sendable () -> Double

    package init(options: Options, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.options = options
        self.random = random
    }

    package mutating func apply(_ options: Options) { self.options = options }

    package var streamCount: Int { streams.count }

    // MARK: - Events

    /// A new subscription, named by the caller's `id`: requested at once (or held while paused).
    package mutating func open(id: OperationID, payload: ByteBuffer, now: Instant) -> [Action] {
        guard streams[id] == nil else {
            assertionFailure("stream \(id) opened twice")
            return []
        }
        var actions: [Action] = []
        guard !isShutDown else {
            actions.append(.update(id: id, .finished(.error(.transport(.shutDown)))))
            return actions
        }
        failure = nil  // a new subscribe tries a failed upstream again, as on a WebSocket
        streams[id] = Stream(payload: payload, phase: .paused, state: paused ? .paused : .pending)
        order.append(id)
        actions.append(.update(id: id, .state(paused ? .paused : .pending)))
        if !paused { request(id, now: now, into: &actions) }
        report(into: &actions)
        return actions
    }

    /// The last subscriber left: the stream is dropped, no update follows.
    package mutating func cancel(id: OperationID) -> [Action] {
        guard let stream = streams.removeValue(forKey: id) else { return [] }
        order.removeAll { $0 == id }
        var actions: [Action] = []
        if let generation = stream.phase.generation { actions.append(.abort(id: id, generation: generation)) }
        report(into: &actions)
        return actions
    }

    /// The response head (or, for an answer that is not a stream, the whole response) arrived.
    package mutating func received(_ head: Head, id: OperationID, generation: Int, now: Instant) -> [Action] {
        guard let stream = streams[id], case .requesting(generation, _) = stream.phase else { return [] }
        var actions: [Action] = []
        switch head {
        case .stream:
            streams[id]?.phase = .streaming(generation: generation, since: now, lastByte: now)
            streams[id]?.cause = nil
            setState(id, .active, into: &actions)
        case .answer(let status, let reason, let body):
            switch status {
            case 401, 403:
                failAll(status: status, reason: reason, into: &actions)
            case 200..<300, 400..<500:
                for update in Self.answerUpdates(status: status, reason: reason, body: body) {
                    if case .finished(let finish) = update { end(id, finish, into: &actions) } else { actions.append(.update(id: id, update)) }
                }
            default:
                lost(id, cause: .httpStatus(code: status, reason: reason), now: now, into: &actions)
            }
        }
        report(into: &actions)
        return actions
    }

    /// Bytes arrived on stream `generation` of `id`: it is alive.
    package mutating func bytesArrived(id: OperationID, generation: Int, now: Instant) {
        guard case .streaming(generation, let since, _)? = streams[id]?.phase else { return }
        streams[id]?.phase = .streaming(generation: generation, since: since, lastByte: now)
    }

    /// One message of stream `generation` of `id`.
    package mutating func message(_ message: StreamMessage, id: OperationID, generation: Int, now: Instant) -> [Action] {
        guard case .streaming(generation, _, _)? = streams[id]?.phase else { return [] }
        var actions: [Action] = []
        switch message {
        case .heartbeat, .ignored:
            break
        case .result(let payload):
            actions.append(.update(id: id, .next(payload)))
        case .fatal(let errors):
            actions.append(.abort(id: id, generation: generation))
            end(id, .error(.upstream(errors)), into: &actions)
        case .completed:
            actions.append(.abort(id: id, generation: generation))
            end(id, .completed, into: &actions)
        }
        report(into: &actions)
        return actions
    }

    /// Stream `generation` of `id` ended without its close (EOF, a network error, bytes that
    /// cannot be read): requested again after the backoff.
    package mutating func streamLost(id: OperationID, generation: Int, cause: DisconnectCause, now: Instant) -> [Action] {
        guard let phase = streams[id]?.phase, phase.generation == generation else { return [] }
        var actions: [Action] = []
        actions.append(.abort(id: id, generation: generation))
        lost(id, cause: cause, now: now, into: &actions)
        report(into: &actions)
        return actions
    }

    /// Deadlines: backoff over, no response head in time, a silent stream.
    package mutating func tick(now: Instant) -> [Action] {
        var actions: [Action] = []
        for id in order {
            guard let stream = streams[id] else { continue }
            switch stream.phase {
            case .waiting(let until) where until <= now:
                request(id, now: now, into: &actions)
            case .requesting(let generation, let since) where since + options.connectTimeout <= now:
                actions.append(.abort(id: id, generation: generation))
                lost(id, cause: .connectTimeout(options.connectTimeout), now: now, into: &actions)
            case .streaming(let generation, _, let lastByte) where lastByte + options.heartbeatTimeout <= now:
                actions.append(.abort(id: id, generation: generation))
                lost(id, cause: .deadPeer(silence: options.heartbeatTimeout, afterKeepAlive: true), now: now, into: &actions)
            default:
                continue
            }
        }
        report(into: &actions)
        return actions
    }

    package var nextDeadline: Instant? {
        var earliest: Instant?
        for stream in streams.values {
            let deadline: Instant? =
                switch stream.phase {
                case .waiting(let until): until
                case .requesting(_, let since): since + options.connectTimeout
                case .streaming(_, _, let lastByte): lastByte + options.heartbeatTimeout
                case .paused: nil
                }
            if let deadline, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        return earliest
    }

    /// Drops every stream and requests none until ``resume(now:)``.
    package mutating func pause() -> [Action] {
        guard !isShutDown else { return [] }
        paused = true
        var actions: [Action] = []
        for id in order {
            if let generation = streams[id]?.phase.generation { actions.append(.abort(id: id, generation: generation)) }
            streams[id]?.phase = .paused
            setState(id, .paused, into: &actions)
        }
        report(into: &actions)
        return actions
    }

    /// Leaves `paused` or `failed`: every stream is requested at once.
    package mutating func resume(now: Instant) -> [Action] {
        guard !isShutDown else { return [] }
        paused = false
        failure = nil
        var actions: [Action] = []
        for id in order where streams[id]?.phase == .paused {
            streams[id]?.attempt = 0
            setState(id, .reconnecting, into: &actions)
            request(id, now: now, into: &actions)
        }
        report(into: &actions)
        return actions
    }

    /// New credentials (`reconnect_if_connected`): every live stream is requested again now.
    package mutating func reconnectNow(now: Instant) -> [Action] {
        guard !isShutDown, !paused else { return [] }
        failure = nil
        var actions: [Action] = []
        for id in order {
            guard let stream = streams[id] else { continue }
            if let generation = stream.phase.generation { actions.append(.abort(id: id, generation: generation)) }
            streams[id]?.attempt = 0
            if stream.state == .active { setState(id, .reconnecting, into: &actions) }
            request(id, now: now, into: &actions)
        }
        report(into: &actions)
        return actions
    }

    /// Every stream ends with `SHUTTING_DOWN`; nothing is requested again.
    package mutating func shutdown() -> [Action] {
        guard !isShutDown else { return [] }
        isShutDown = true
        var actions: [Action] = []
        for id in order {
            guard let stream = streams[id] else { continue }
            if let generation = stream.phase.generation { actions.append(.abort(id: id, generation: generation)) }
            actions.append(.update(id: id, .finished(.error(.transport(.shutDown)))))
        }
        streams = [:]
        order = []
        report(into: &actions)
        return actions
    }

    // MARK: - The upstream's state as operators see it

    /// Shut down, paused or failed; else reconnecting while a stream waits to be requested
    /// again, connecting while one waits for its response, connected otherwise.
    package var connectionState: ConnectionState {
        if isShutDown { return .shutDown }
        if paused { return .paused }
        if let failure { return .failed(closeCode: nil, reason: failure) }
        var connecting: Int?
        for id in order {
            guard let stream = streams[id] else { continue }
            switch stream.phase {
            case .waiting:
                if let cause = stream.cause {
                    return .reconnecting(attempt: stream.attempt, delay: stream.delay, cause: cause)
                }
            case .requesting:
                connecting = max(connecting ?? 1, stream.attempt)  // the first connect counts as 1, as on a WebSocket
            default:
                continue
            }
        }
        if let connecting { return .connecting(attempt: connecting) }
        return streams.isEmpty ? .idle : .connected
    }

    // MARK: - Steps

    private mutating func request(_ id: OperationID, now: Instant, into actions: inout [Action]) {
        guard let stream = streams[id] else { return }
        nextGeneration += 1
        streams[id]?.phase = .requesting(generation: nextGeneration, since: now)
        actions.append(.request(id: id, generation: nextGeneration, payload: stream.payload))
    }

    private mutating func lost(_ id: OperationID, cause: DisconnectCause, now: Instant, into actions: inout [Action]) {
        guard var stream = streams[id] else { return }
        var wasStreaming = false
        if case .streaming(_, let since, _) = stream.phase {
            wasStreaming = true
            if now - since >= options.healthyAfter { stream.attempt = 0 }
        }
        stream.attempt += 1
        stream.cause = cause
        guard let delay = options.backoff.delay(attempt: stream.attempt, random: random()) else {
            let reason =
                options.backoff.initial == nil
                ? "\(cause); reconnection is disabled" : "\(cause); gave up after \(options.backoff.maxAttempts) attempts"
            end(id, .error(.transport(.connectionLost(reason: reason))), into: &actions)
            return
        }
        stream.phase = .waiting(until: now + delay)
        stream.delay = delay
        streams[id] = stream
        // As a WebSocket tells it: one `disconnected` when the upstream that was up is lost, not
        // one per stream, and none for a request that never got through.
        if wasStreaming && reported == .connected {
            actions.append(.event(.disconnected(closeCode: nil, reason: cause.description)))
        }
        if stream.state != .pending { setState(id, .reconnecting, into: &actions) }
    }

    private mutating func end(_ id: OperationID, _ finish: OperationFinish, into actions: inout [Action]) {
        guard streams.removeValue(forKey: id) != nil else { return }
        order.removeAll { $0 == id }
        actions.append(.update(id: id, .finished(finish)))
    }

    private mutating func failAll(status: Int, reason: String, into actions: inout [Action]) {
        let text = "HTTP \(status) \(reason)"
        failure = text
        actions.append(.event(.disconnected(closeCode: nil, reason: text)))
        let message = "upstream refused the request: \(text); not retried until a reload, resume or new subscribe"
        for id in order {
            guard let stream = streams[id] else { continue }
            if let generation = stream.phase.generation { actions.append(.abort(id: id, generation: generation)) }
            actions.append(.update(id: id, .finished(.error(.transport(.upstreamClosed(message: message, closeCode: nil, closeReason: text))))))
        }
        streams = [:]
        order = []
    }

    private mutating func setState(_ id: OperationID, _ state: OperationState, into actions: inout [Action]) {
        guard let current = streams[id]?.state, current != state else { return }
        streams[id]?.state = state
        actions.append(.update(id: id, .state(state)))
    }

    private mutating func report(into actions: inout [Action]) {
        let state = connectionState
        guard state != reported else { return }
        let wasConnected = reported == .connected
        reported = state
        actions.append(.event(.stateChanged(state)))
        // As a WebSocket transport tells them: the first time `connected`, after a loss `reconnected`.
        if state == .connected && !wasConnected {
            actions.append(.event(everConnected ? .reconnected : .connected))
            everConnected = true
        }
    }

    /// A complete answer that is not a stream: a JSON object with `errors` ends the operation
    /// with them (a request error, a 4xx of GraphQL over HTTP); one with only `data` is one
    /// result; anything else names the status.
    static func answerUpdates(status: Int, reason: String, body: ByteBuffer) -> [OperationUpdate] {
        let members = body.withUnsafeReadableBytes { try? JSONScanner.scanObject($0) }
        if let members, let errors = members.first(where: { $0.key == "errors" && $0.kind == .array }) {
            return [.finished(.error(.upstream(body.getSlice(at: body.readerIndex + errors.range.lowerBound, length: errors.range.count)!)))]
        }
        if let members, (200..<300).contains(status), members.contains(where: { $0.key == "data" }) {
            return [.next(body), .finished(.completed)]
        }
        let message = "HTTP \(status) \(reason) from the server instead of a stream; the subscription was not retried"
        return [.finished(.error(.transport(.upstreamClosed(message: message, closeCode: nil, closeReason: "HTTP \(status)"))))]
    }
}
