import GQLMuxConfiguration
import GQLMuxVocabulary
import Handover
import LocalProtocol
import Multiplexing
import NIOCore
import RequestValidation
import SystemdSupport
import Upstream

#if canImport(Glibc)
import Glibc
#endif

/// The online restart, this process's side: instead of closing its clients on SIGTERM, it
/// hands their connections and its own listeners to the service manager's file descriptor
/// store, with a record of what each client is (``HandoverState``), and the next process
/// adopts them (`Daemon+Adoption.swift`).
///
///     serving ──SIGTERM, store present──▶ draining: nothing more is read or accepted;
///        queries and mutations in flight get their answers (at most 3 s)
///     draining ──▶ sorting: each client is carried (line protocol, an endpoint WebSocket, or
///        an endpoint SSE or multipart stream, with no half-read request) or closed with
///        SHUTTING_DOWN (HTTP between requests, a half-sent line or frame, a query still
///        unanswered); line clients are told `reconnecting`
///     sorting ──▶ flushing: every carried client's pending bytes reach the kernel (at most 2 s;
///        one that does not read is closed, not carried half-written)
///     flushing ──▶ stored: the record, the connections and the listeners go to the store; the
///        upstream closes 1000; the process exits and keeps every carried socket open in the store
///     stored ✗ (the store refused) ──▶ the ordinary stop for the carried clients
extension Daemon {
    /// What this process leaves the next one.
    package struct HandoverPackage: Sendable {
        /// ``HandoverState``'s bytes.
        package var record: [UInt8]
        /// The cookies (`SO_COOKIE`) of the client connections the record describes.
        package var clients: [UInt64]
        /// This process's own listeners (not a socket unit's), by the name the next process
        /// knows them by: `line`, `graphql` or `tcp`, and their cookies.
        package var listeners: [String: UInt64]
    }

    /// Where a handover goes: gqlmuxd stores it in systemd's file descriptor store. Throws when
    /// it cannot; the clients are then closed as in an ordinary stop.
    package typealias HandoverStore = @Sendable (HandoverPackage) throws -> Void

    /// `gqlmuxctl restart`: begins an online restart, or says why it cannot. On the loop.
    func restart() -> String? {
        eventLoop.assertInEventLoop()
        guard let requestStop = hooks.onlineRestart?.requestStop else {
            return
                "restart needs systemd's file descriptor store (gqlmuxd.service sets FileDescriptorStoreMax= and FDSTORE=); restart the daemon with your service manager instead"
        }
        guard !run.stopping, !run.restartRequested else { return "gqlmuxd is already stopping" }
        run.restartRequested = true
        // After this turn, so the `ok` is written first (and handed over with the rest).
        eventLoop.execute { requestStop() }
        return nil
    }

    /// How long queries and mutations in flight may take to answer before the handover.
    static let answerWait: TimeAmount = .seconds(3)
    /// How long carried clients may take to read what was written to them before.
    static let flushWait: TimeAmount = .seconds(2)

    /// Hands every client that can be carried to `store`, closes the rest as a stop does, and
    /// closes the upstream. Returns false when the daemon was already stopping.
    package func handOver(to store: HandoverStore, reason: String) async -> Bool {
        let began = try? await eventLoop.submit { () -> Bool in
            guard !self.run.stopping else { return false }
            self.run.stopping = true
            for channel in [self.listening.serverChannel].compactMap({ $0 }) + self.listening.endpointChannels {
                _ = channel.setOption(.autoRead, value: false)
            }
            for session in self.sessions.values { _ = session.channel.setOption(.autoRead, value: false) }
            return true
        }.get()
        guard began == true else { return false }
        events.emit(.stopping, ["GQLMUX_REASON": reason], message: "stopping for a restart (\(reason)): handing clients to the next process")
        HandoverFault.reached(.draining, loop: eventLoop)

        // Draining: what is in flight gets its answer (the switchboard says when the last one came).
        _ = try? await eventLoop.flatSubmit { self.switchboard.noAnswerPending(within: Self.answerWait) }.get()

        // Sorting and flushing, on the loop.
        let sorted = try? await eventLoop.flatSubmit { self.sortAndFlush() }.get()
        let carried = sorted?.carried ?? []
        let closedEarly = sorted?.closed ?? 0
        let listeners = (try? await eventLoop.submit { self.ownListenerCookies() }.get()) ?? [:]
        let state = HandoverState(
            handedAt: sorted?.at ?? Instant(nanoseconds: 0),
            clients: carried.map(\.record),
            laneCredentials: sorted?.laneCredentials ?? []
        )
        let package = HandoverPackage(record: state.encoded(), clients: carried.map(\.record.cookie), listeners: listeners)
        var stored = true
        do {
            try store(package)
            events.emit(
                .handedOver,
                [
                    "GQLMUX_CLIENTS": "\(carried.count)", "GQLMUX_SUBSCRIPTIONS": "\(carried.reduce(0) { $0 + $1.record.subscriptions.count })",
                    "GQLMUX_CLOSED": "\(closedEarly)", "GQLMUX_LISTENERS": listeners.keys.sorted().joined(separator: " "),
                ],
                message: "handed \(carried.count) clients to the next process (\(closedEarly) closed instead)"
            )
        } catch {
            stored = false
            events.emit(.handoverFailed, ["GQLMUX_ERROR": "\(error)"], message: "could not hand clients to the next process: \(error); stopping instead")
            // Told SHUTTING_DOWN and closed, as in a stop; waited for like a stop's.
            let closes: [EventLoopFuture<Void>] =
                (try? await eventLoop.submit { () -> [EventLoopFuture<Void>] in
                    for (session, _) in carried { session.shutDownAfterHandover() }
                    return carried.map { $0.session.channel.closeFuture }
                }.get()) ?? []
            _ = try? await EventLoopFuture.andAllComplete(closes, on: eventLoop).get()
        }
        // This process's copies of what was stored are closed now, as exiting would close them:
        // close(2) only (no shutdown), so the copies in the store keep every connection open.
        let closeCarried = stored
        _ = try? await eventLoop.flatSubmit {
            if closeCarried {
                for (session, _) in carried { session.channel.close(promise: nil) }
            }
            for listener in [self.listening.serverChannel].compactMap({ $0 }) + self.listening.endpointChannels { listener.close(promise: nil) }
            self.switchboard.shutDown()
            return self.shutDownUpstreams()
        }.get()
        HandoverFault.reached(.exiting, loop: eventLoop)
        return true
    }

    private struct Sorted: Sendable {
        var carried: [(session: ClientSession, record: HandoverState.Client)]
        var closed: Int
        var at: Instant
        /// The credentials the carried subscriptions name (``HandoverState/laneCredentials``).
        var laneCredentials: [HandoverState.Client.Credential]
    }

    /// Splits the sessions into carried and closed, tells the carried line clients
    /// `reconnecting`, and completes once every carried client's bytes are written (or the
    /// flush wait passed; a client that did not read by then is closed instead).
    private func sortAndFlush() -> EventLoopFuture<Sorted> {
        eventLoop.assertInEventLoop()
        // This turn's results reach every client first: a carried one is told `reconnecting`
        // after them, a closed one `SHUTTING_DOWN`.
        switchboard.writePendingResults()
        let at = Instant(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds))
        var carried: [(session: ClientSession, record: HandoverState.Client)] = []
        var closed = 0
        var laneCredentials = LaneCredentialTable()
        for session in sessions.values.sorted(by: { ObjectIdentifier($0) < ObjectIdentifier($1) }) {
            guard let record = carriedRecord(session, laneCredentials: &laneCredentials) else {
                closed += 1
                session.shutDown()
                continue
            }
            for message in session.wire?.farewell(subscriptions: record.subscriptions.map(\.id)) ?? [] {
                session.send(message, flush: false)
            }
            carried.append((session, record))
        }
        // Written and flushed before the WebSocket handlers stop writing.
        let flushed = carried.map { $0.session.handOver() }
        HandoverFault.reached(.flushing, loop: eventLoop)
        for (session, _) in carried {
            sessions.removeValue(forKey: ObjectIdentifier(session))
            session.wire?.handOver()
        }
        let done = eventLoop.makePromise(of: Sorted.self)
        var finished = false
        let finish = NIOLoopBound(
            { (written: [Bool]) in
                guard !finished else { return }
                finished = true
                var kept: [(session: ClientSession, record: HandoverState.Client)] = []
                var closedLate = 0
                for (index, entry) in carried.enumerated() {
                    if written[index] {
                        kept.append(entry)
                    } else {
                        closedLate += 1
                        entry.session.channel.close(promise: nil)
                    }
                }
                done.succeed(Sorted(carried: kept, closed: closed + closedLate, at: at, laneCredentials: laneCredentials.credentials))
            },
            eventLoop: eventLoop
        )
        let state = NIOLoopBoundBox([Bool](repeating: false, count: carried.count), eventLoop: eventLoop)
        for (index, future) in flushed.enumerated() {
            future.whenSuccess { state.value[index] = true }
        }
        EventLoopFuture.whenAllComplete(flushed, on: eventLoop).whenComplete { _ in finish.value(state.value) }
        eventLoop.scheduleTask(in: Self.flushWait) { finish.value(state.value) }
        return done.futureResult
    }

    /// What the next process needs to rebuild `session`, or nil when it cannot be carried
    /// whole: its wire says so (``CarriedConnection``: an HTTP client not streaming a
    /// subscription, a close under way), or it holds a half-sent line or frame, or a query or
    /// mutation of its is still in flight, or its connection is closing. A subscription made
    /// before the client presented its latest credential names, in `laneCredentials`, the one
    /// its lane was given for.
    private func carriedRecord(_ session: ClientSession, laneCredentials: inout LaneCredentialTable) -> HandoverState.Client? {
        guard session.channel.isActive, !session.isClosing, !session.holdsPartialInput, !switchboard.awaitsAnswer(session),
            let carriage = session.wire?.carriage, let cookie = Self.cookie(session.channel)
        else { return nil }
        var subscriptions: [HandoverState.Subscription] = []
        for open in switchboard.subscriptions(of: session) {
            let upstream = upstreams.upstreamName(of: open.lane)
            var credential: Int?
            if let made = session.presentedCredentials.presentedForLane[open.lane], made != session.presented {
                credential = laneCredentials.index(of: open.lane, made)
            }
            subscriptions.append(
                HandoverState.Subscription(
                    id: open.localID,
                    payload: String(buffer: open.payload),
                    snapshot: open.snapshot.map { String(buffer: $0) },
                    upstream: upstream == NamedUpstream.defaultName ? nil : upstream,
                    credential: credential
                )
            )
        }
        return HandoverState.Client(
            cookie: cookie,
            origin: session.arrival.listener,
            kind: carriage.kind,
            name: session.name,
            acknowledged: carriage.acknowledged,
            subscriptions: subscriptions,
            upstream: carriage.upstream,
            presentedPayload: session.presented.payload.map { String(decoding: $0, as: UTF8.self) },
            presentedHeaders: session.presented.headers,
            connectedAtMs: session.connectedAtMs,
            restarts: session.restarts
        )
    }

    /// This process's own listeners (the socket units' stay with their units), by name.
    private func ownListenerCookies() -> [String: UInt64] {
        eventLoop.assertInEventLoop()
        var found: [String: UInt64] = [:]
        if listening.ownsSocketFile, let server = listening.serverChannel, let cookie = Self.cookie(server) { found["line"] = cookie }
        for channel in listening.endpointChannels {
            if channel.localAddress?.pathname != nil {
                if listening.endpointSocketFile != nil, let cookie = Self.cookie(channel) { found["graphql"] = cookie }
            } else if let cookie = Self.cookie(channel) {
                found["tcp"] = cookie
            }
        }
        return found
    }

    /// A socket's cookie (``SocketOptionNow/cookie(of:)``), on the channel's loop.
    static func cookie(_ channel: any Channel) -> UInt64? { SocketOptionNow.cookie(of: channel) }
}

/// The handover record's credentials for lanes their clients no longer present for, one per
/// lane: any credential that picked a lane picks it again, so at most one per identity.
struct LaneCredentialTable {
    private(set) var credentials: [HandoverState.Client.Credential] = []
    private var byLane: [LaneID: Int] = [:]

    /// The index of `lane`'s credential, `presented` kept if it is the first for that lane.
    mutating func index(of lane: LaneID, _ presented: PresentedCredential) -> Int {
        if let index = byLane[lane] { return index }
        credentials.append(.init(payload: presented.payload.map { String(decoding: $0, as: UTF8.self) }, headers: presented.headers))
        byLane[lane] = credentials.count - 1
        return credentials.count - 1
    }
}
