import GraphQLTransportWS
import LocalProtocol
import NIOCore
import RequestValidation
import Upstream

/// The dedup table and reference counts: N local subscribers of one key share one upstream
/// operation; the last one to leave completes it upstream. Lives on the daemon's loop.
///
/// `@unchecked Sendable` — safe because it is used only on the daemon's event loop: from
/// `ClientSession` handlers and transport callbacks of channels on that loop; `subscribe` and
/// `unsubscribe` assert it.
final class Fanout: @unchecked Sendable {
    let pool: ConnectionPool
    /// Queries and mutations go here when `[upstream] http_url` is set.
    var http: HTTPOperations?
    private var byKey: [String: UpstreamEntry] = [:]
    /// Live upstream operations. Ids are per connection (each transport numbers its own), so the
    /// entry itself is the key.
    private var live: [ObjectIdentifier: UpstreamEntry] = [:]
    let events: DaemonEvents
    let metrics: DaemonMetrics
    /// Sessions written to since the last flush, each once (see `ClientSession.awaitingFlush`).
    private var dirty: [ClientSession] = []
    private var flushScheduled = false
    private(set) var messagesIn = 0
    private(set) var messagesOut = 0
    /// Unwritten bytes of all clients together, as last measured (see `MemoryBudget.swift`).
    var totalBuffered = 0
    /// `[limits] total_buffer_bytes`.
    var totalBufferBytes: Int
    /// Every live session, for the memory budget's search of the client furthest behind.
    var sessions: () -> [ClientSession] = { [] }
    var trimScheduled = false

    init(pool: ConnectionPool, events: DaemonEvents, metrics: DaemonMetrics, totalBufferBytes: Int) {
        self.pool = pool
        self.events = events
        self.metrics = metrics
        self.totalBufferBytes = totalBufferBytes
    }

    var upstreamCount: Int { live.count }

    /// Every upstream connection is at `max_operations_per_connection` and the pool at
    /// `max_connections`: a new upstream operation cannot be placed.
    struct PoolFull: Error {}

    /// Adds a local subscriber, joining an identical live subscription when there is one.
    /// - Throws: ``PoolFull`` when a new upstream operation is needed and no connection has room.
    func subscribe(_ request: SubscribeRequest, session: ClientSession, localID: String) throws -> UpstreamEntry {
        pool.eventLoop.assertInEventLoop()
        let subscriber = UpstreamEntry.Subscriber(session: session, localID: localID, prefix: LocalEncode.nextPrefix(id: localID))
        if request.kind == .subscription, let entry = byKey[request.dedupKey] {
            entry.subscribers.append(subscriber)
            session.send(LocalEncode.state(id: localID, entry.state.rawValue))
            events.emit(
                .subscribed,
                ["GQLMUX_OPERATION_ID": entry.upstreamID, "GQLMUX_LOCAL_ID": localID, "GQLMUX_SHARED": "true"],
                message: "operation \(localID) joined upstream subscription \(entry.upstreamID) (\(entry.subscribers.count) subscribers)"
            )
            return entry
        }
        let overHTTP = request.kind != .subscription && http != nil
        var transport: UpstreamTransport?
        if !overHTTP {
            guard let placed = try? pool.transportForNewOperation() else { throw PoolFull() }
            transport = placed
        }
        let entry = UpstreamEntry(dedupKey: request.kind == .subscription ? request.dedupKey : nil, kind: request.kind)
        entry.subscribers.append(subscriber)
        if let key = entry.dedupKey { byKey[key] = entry }
        let handler: OperationHandler = { [weak self, weak entry] update in
            guard let self, let entry else { return }
            self.deliver(update, to: entry)
        }
        if let transport {
            entry.transport = transport
            entry.upstreamID = transport.subscribeOnLoop(kind: request.kind, payload: request.payload, handler: handler)
        } else if let http {
            entry.overHTTP = true
            entry.upstreamID = http.sendOnLoop(payload: request.payload, handler: handler)
        }
        // The transport may have finished it at once (shutting down): register only a live one.
        if entry.subscribers.isEmpty {
            if let key = entry.dedupKey, byKey[key] === entry { byKey[key] = nil }
        } else {
            live[ObjectIdentifier(entry)] = entry
        }
        var fields = ["GQLMUX_OPERATION_ID": entry.upstreamID, "GQLMUX_LOCAL_ID": localID, "GQLMUX_OPERATION_KIND": "\(request.kind)"]
        if let transport, let index = pool.index(of: transport) { fields["GQLMUX_CONNECTION"] = "\(index)" }
        if entry.overHTTP { fields["GQLMUX_HTTP"] = "true" }
        events.emit(.subscribed, fields, message: "operation \(localID) sent upstream as \(request.kind) \(entry.upstreamID)")
        return entry
    }

    /// Removes one local subscriber; the last one out completes the upstream operation.
    func unsubscribe(_ entry: UpstreamEntry, session: ClientSession, localID: String) {
        pool.eventLoop.assertInEventLoop()
        entry.remove(session: session, localID: localID)
        guard entry.subscribers.isEmpty, live[ObjectIdentifier(entry)] === entry else { return }
        forget(entry)
        if entry.overHTTP {
            http?.cancelOnLoop(id: entry.upstreamID)
        } else {
            entry.transport?.completeOnLoop(id: entry.upstreamID)
        }
        events.emit(
            .completed,
            ["GQLMUX_OPERATION_ID": entry.upstreamID, "GQLMUX_REASON": "last subscriber left"],
            message: "upstream operation \(entry.upstreamID) completed: last subscriber left"
        )
    }

    private func forget(_ entry: UpstreamEntry) {
        live[ObjectIdentifier(entry)] = nil
        if let key = entry.dedupKey, byKey[key] === entry { byKey[key] = nil }
    }

    private func deliver(_ update: OperationUpdate, to entry: UpstreamEntry) {
        switch update {
        case .next(let payload):
            messagesIn += 1
            for subscriber in entry.subscribers where subscriber.session.writeNext(prefix: subscriber.prefix, payload: payload) {
                messagesOut += 1
                markDirty(subscriber.session)
            }
        case .state(let state):
            entry.state = state
            // Lifecycle states are told for subscriptions only; a query just answers.
            guard entry.kind == .subscription else { return }
            for subscriber in entry.subscribers {
                subscriber.session.send(LocalEncode.state(id: subscriber.localID, state.rawValue), flush: false)
                markDirty(subscriber.session)
            }
        case .finished(let finish):
            forget(entry)
            let subscribers = entry.subscribers
            entry.subscribers.removeAll()
            for subscriber in subscribers {
                subscriber.session.operationFinished(localID: subscriber.localID)
                subscriber.session.send(Self.encode(finish, localID: subscriber.localID), flush: false)
                markDirty(subscriber.session)
            }
            if case .error(let error) = finish {
                var fields = ["GQLMUX_OPERATION_ID": entry.upstreamID]
                if case .transport(let failure) = error { fields["GQLMUX_ERROR_CODE"] = Self.localError(failure).code }
                metrics.errorSent(code: fields["GQLMUX_ERROR_CODE"] ?? "upstream", count: subscribers.count)
                events.emit(
                    .operationError,
                    fields,
                    message: "upstream operation \(entry.upstreamID) ended with an error" + (fields["GQLMUX_ERROR_CODE"].map { " (\($0))" } ?? "")
                )
            } else if finish == .completed {
                events.emit(
                    .completed,
                    ["GQLMUX_OPERATION_ID": entry.upstreamID, "GQLMUX_REASON": "upstream completed"],
                    message: "upstream operation \(entry.upstreamID) completed by the server"
                )
            }
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

    /// The transport's failure in the local protocol's words (DESIGN.md section 4).
    static func localError(_ failure: TransportFailure) -> (code: String, message: String, extra: [(String, String)]) {
        switch failure {
        case .connectionLost(let reason):
            return (LocalErrorCode.connectionLost, reason, [])
        case .upstreamClosed(let message, let closeCode, let closeReason):
            var extra: [(String, String)] = []
            if let closeCode { extra.append(("closeCode", "\(closeCode)")) }
            extra.append(("closeReason", jsonString(closeReason)))
            return (LocalErrorCode.upstreamClosed, message, extra)
        case .shutDown:
            return (LocalErrorCode.shuttingDown, "gqlmuxd is shutting down", [])
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
