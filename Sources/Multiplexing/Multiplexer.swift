import GQLMuxVocabulary
import NIOCore

/// The ONE registry of the daemon's operations: which local operation reads which upstream
/// operation, dedup keys, reference counts, subscriber lists, each upstream operation's state
/// and where it is placed (which pool connection, `http_url`, or an HTTP stream). Pure: events
/// in, actions out, no I/O, no clock (nothing here waits on time).
///
/// States of one upstream operation:
///
///     (none) ──subscribe, no live key, a place──▶ open(pending) ──upstream state──▶ pending/active/reconnecting/paused
///        │  no place (pool or max_streams full): refused, nothing kept
///        ▲                                 │  ▲  subscribe same key: joins, told the current state
///        │                                 │  └─ complete / client gone: one subscriber fewer
///        └── last subscriber left (close) ─┤
///        └── upstream finished (finish each subscriber) / shut down
///
/// Its ``OperationID`` is the one name the I/O layer and every carrier use for it, down to
/// the wire and back.
///
/// Local operations belong to a client (`Client`) and are named by the client's id for it.
/// `Tag` is whatever the I/O layer keeps per subscriber for the hot path (the daemon: the
/// session and its encoded `next` prefix); the core never looks at it.
package struct Multiplexer<Client: Hashable, Tag> {
    /// One upstream operation's name, unique for the multiplexer's life.
    package typealias OperationID = GQLMuxVocabulary.OperationID

    /// A local operation reading an upstream one.
    package struct Subscriber {
        package let client: Client
        package let localID: String
        package let tag: Tag

        package init(client: Client, localID: String, tag: Tag) {
            self.client = client
            self.localID = localID
            self.tag = tag
        }

        package var key: SubscriberKey { SubscriberKey(client: client, localID: localID) }
    }

    /// A local operation's name: its client and the client's id for it.
    package struct SubscriberKey: Hashable {
        package let client: Client
        package let localID: String

        package init(client: Client, localID: String) {
            self.client = client
            self.localID = localID
        }
    }

    /// Why a `subscribe` was refused; nothing else changed.
    package enum Refusal: Equatable, Sendable {
        /// The client already uses this local id.
        case duplicateID
        /// The client has `maxOperationsPerClient` operations.
        case tooManyOperations(limit: Int)
        /// No carrier has room (`max_connections` × `max_operations_per_connection`, or
        /// `max_streams`).
        case upstreamFull
        /// The daemon is shutting down.
        case shuttingDown
    }

    /// What the I/O layer must do, in order.
    package enum Action {
        /// Send a new operation upstream on `placement` (a pool connection that may not exist
        /// yet, `http_url` or a stream); `first` asked for it.
        case open(OperationID, kind: OperationKind, payload: ByteBuffer, on: Placement, first: Subscriber, lane: LaneID = .primary)
        /// `subscriber` joined a live subscription of `subscribers` members; tell it `state`.
        case joined(OperationID, subscriber: Subscriber, state: OperationState, subscribers: Int)
        /// `subscriber`, carried over from the previous process, joined a subscription: it was
        /// told `reconnecting` before the restart, so it is told nothing now; its `active` comes
        /// with the stream's, or right after this when the stream is active already.
        case resumed(OperationID, subscriber: Subscriber, subscribers: Int)
        /// Give `subscriber`, which just joined and asked for it, the subscription's latest
        /// result, marked as replayed (it follows its `joined`).
        case replay(Subscriber, ByteBuffer)
        /// Give `subscriber` the result of the query it named for its stream's resumes
        /// (`resnapshot`), marked as a snapshot; its stream's results held meanwhile follow.
        case snapshot(Subscriber, ByteBuffer)
        /// Give `subscriber` a result of its stream that was held until its snapshot came.
        case deliverHeld(Subscriber, ByteBuffer)
        /// Complete the upstream operation on its carrier: its last subscriber left.
        case close(OperationID, on: Placement, lane: LaneID = .primary)
        /// Tell one subscriber its operation's new state; an `active` after the stream was down
        /// carries how long it was down (`gap`).
        case tellState(Subscriber, OperationState, gap: Duration? = nil)
        /// Tell one subscriber its operation ended (its local id is free again).
        case finish(Subscriber, OperationFinish)
        /// The upstream operation ended for `subscribers` local operations (for logs, metrics).
        case finished(OperationID, OperationFinish, subscribers: Int, lane: LaneID = .primary)
        /// Refuse a `subscribe`.
        case refuse(client: Client, localID: String, Refusal)
        /// Every operation of a client ends with the daemon's shutdown; tell it.
        case shutDown(Subscriber)
    }

    private struct Operation {
        let kind: OperationKind
        let lane: LaneID
        var placement: Placement
        /// Set for deduplicated subscriptions; nil for queries and mutations (never shared).
        let key: DedupKey?
        var state: OperationState = .pending
        var subscribers: [Subscriber] = []
        /// What was sent upstream (a handover carries it to the next process).
        var payload = ByteBuffer()
        /// Opened for subscribers carried over a restart, and not active since: its `pending`
        /// is not told (they already know they are `reconnecting`).
        var resuming = false
    }

    package var maxOperationsPerClient: Int
    /// Where the primary lane's new operations may go; a reload replaces it (live operations
    /// stay where they are), and forgets what servers said of their connections' caps.
    package var layout: UpstreamLayout {
        get { placers[.primary]?.layout ?? UpstreamLayout() }
        set { setLayout(newValue, of: .primary) }
    }
    /// Each lane's places and their load; a lane with no placer takes no new operation.
    private var placers: [LaneID: LanePlacer] = [:]
    private var operations: [OperationID: Operation] = [:]
    /// A subscription's dedup key within its lane: lanes never share one.
    private struct LaneKey: Hashable {
        let lane: LaneID
        let key: DedupKey
    }
    private var byKey: [LaneKey: OperationID] = [:]
    /// Each client's local ids and the upstream operation each reads.
    private var clients: [Client: [String: OperationID]] = [:]
    private var nextID = 1
    private var shuttingDown = false
    /// Bytes of the latest results kept for replays, all operations together.
    package private(set) var retainedBytes = 0
    /// The latest result of each active shared subscription that has one: a copy (a slice
    /// would pin the whole read buffer it came in), its storage reused for the next. Beside
    /// the operations, not in them, so an idle subscription pays nothing for it.
    private var lastResults: [OperationID: ByteBuffer] = [:]
    /// When each stream that is down (reconnecting, pending, paused after being active) went
    /// down, until it is active again.
    private var downSince: [OperationID: Instant] = [:]

    /// A query that subscribers of one stream named to run at each of its resumes, and who.
    private struct SnapshotRequest {
        let payload: ByteBuffer
        var readers: [SubscriberKey]
    }
    /// Each stream's snapshot requests.
    private var snapshotRequests: [OperationID: [SnapshotRequest]] = [:]
    /// Snapshot queries in flight: for which stream, and who waits for the answer.
    private var snapshotQueries: [OperationID: (stream: OperationID, readers: [SubscriberKey])] = [:] {
        didSet { plain = snapshotQueries.isEmpty && holds.isEmpty }
    }
    /// A stream's results held for the subscribers waiting for their snapshot.
    private struct Hold {
        var waiting: Set<SubscriberKey> = []
        /// Copies, in the order they came.
        var results: [ByteBuffer] = []
        var bytes = 0
    }
    /// Streams some of whose subscribers wait for their snapshot.
    private var holds: [OperationID: Hold] = [:] {
        didSet { plain = snapshotQueries.isEmpty && holds.isEmpty }
    }
    /// No snapshot query runs and no stream holds results (see ``deliversPlainly``).
    @usableFromInline var plain = true

    /// Whether every result can go straight to its operation's subscribers: no snapshot query
    /// runs and no stream holds results for a snapshot, so ``isSnapshot(_:)`` and
    /// ``isHolding(_:)`` are false for every operation. Inlined into the hot path (a call into
    /// this generic type from another module looks up its metadata each time).
    @inlinable package var deliversPlainly: Bool { plain }
    /// At most this many results, and this many bytes, are held for a stream; past either the
    /// waiting subscribers get them at once, and their snapshot when it comes.
    package static var maxHeldResults: Int { 1_000 }
    package static var maxHeldBytes: Int { 8 << 20 }

    package init(maxOperationsPerClient: Int, layout: UpstreamLayout = UpstreamLayout()) {
        self.maxOperationsPerClient = maxOperationsPerClient
        self.placers = [.primary: LanePlacer(layout: layout)]
    }

    // MARK: - Reading

    /// The live upstream operations.
    package var upstreamCount: Int { operations.count }

    /// One upstream operation as the operator's view lists it.
    package struct Summary {
        package let id: OperationID
        package let kind: OperationKind
        package let lane: LaneID
        package let state: OperationState
        /// What was sent upstream, for a subscription (its document names it; its variables are
        /// never shown); empty for a query or mutation.
        package let payload: ByteBuffer
        /// The client of each local operation reading it.
        package let readers: [Client]
    }

    /// Every upstream operation, oldest first.
    package var summaries: [Summary] {
        operations.sorted { $0.key < $1.key }.map { id, operation in
            Summary(
                id: id,
                kind: operation.kind,
                lane: operation.lane,
                state: operation.state,
                payload: operation.payload,
                readers: operation.subscribers.map(\.client)
            )
        }
    }
    /// The live local operations of every client.
    package var localCount: Int { clients.values.reduce(0) { $0 + $1.count } }
    /// The local operations of one client.
    package func operationCount(of client: Client) -> Int { clients[client]?.count ?? 0 }
    /// Who reads `id` now, in join order. The hot path: no copy of the list is made.
    package func subscribers(of id: OperationID) -> [Subscriber] { operations[id]?.subscribers ?? [] }
    package func state(of id: OperationID) -> OperationState? { operations[id]?.state }
    /// The upstream operation a client's local id reads.
    package func operation(of client: Client, localID: String) -> OperationID? { clients[client]?[localID] }
    package func placement(of id: OperationID) -> Placement? { operations[id]?.placement }

    /// One local subscription as a restart carries it: the client's id, what went upstream,
    /// and the query it named for resumes, if any.
    package struct CarriedSubscription: Equatable {
        package var localID: String
        package var payload: ByteBuffer
        package var snapshot: ByteBuffer?
        package var lane: LaneID

        package init(localID: String, payload: ByteBuffer, snapshot: ByteBuffer?, lane: LaneID = .primary) {
            self.localID = localID
            self.payload = payload
            self.snapshot = snapshot
            self.lane = lane
        }
    }

    /// A client's subscriptions, in id order (its queries and mutations are not carried: a
    /// mutation is never sent twice).
    package func subscriptions(of client: Client) -> [CarriedSubscription] {
        (clients[client] ?? [:]).sorted { $0.key < $1.key }.compactMap { localID, id in
            guard let operation = operations[id], operation.kind == .subscription else { return nil }
            let reader = SubscriberKey(client: client, localID: localID)
            let snapshot = snapshotRequests[id]?.first { $0.readers.contains(reader) }?.payload
            return CarriedSubscription(localID: localID, payload: operation.payload, snapshot: snapshot, lane: operation.lane)
        }
    }

    /// The local ids of every operation `client` has open (subscriptions, queries and
    /// mutations), in id order.
    package func localIDs(of client: Client) -> [String] { (clients[client] ?? [:]).keys.sorted() }

    /// The lanes of every operation `client` has open.
    package func lanes(of client: Client) -> Set<LaneID> {
        Set((clients[client] ?? [:]).values.compactMap { operations[$0]?.lane })
    }

    /// Whether any client has a query or mutation in flight.
    package var hasAnySingleOperation: Bool { operations.values.contains { $0.kind != .subscription } }

    /// Whether `client` has a query or mutation in flight.
    package func hasSingleOperation(_ client: Client) -> Bool {
        (clients[client] ?? [:]).values.contains { operations[$0]?.kind != .subscription }
    }
    /// Live operations on `placement`.
    package func load(on placement: Placement, lane: LaneID = .primary) -> Int { placers[lane]?.load(on: placement) ?? 0 }

    // MARK: - Lanes

    /// Lane `lane` takes new operations placed by `layout` (a new lane, or a reload's change;
    /// live operations stay where they are).
    package mutating func setLayout(_ layout: UpstreamLayout, of lane: LaneID) {
        if placers[lane] == nil { placers[lane] = LanePlacer(layout: layout) } else { placers[lane]!.layout = layout }
    }

    /// The lane of live operation `id`.
    package func lane(of id: OperationID) -> LaneID? { operations[id]?.lane }

    /// Where `lane`'s new operations go.
    package func layout(of lane: LaneID) -> UpstreamLayout? { placers[lane]?.layout }

    /// Upstream operations open on `lane`.
    package func operationCount(on lane: LaneID) -> Int { placers[lane]?.total ?? 0 }

    /// Every lane's upstream operations and the local operations reading them, in one pass.
    package var countsByLane: [LaneID: (upstream: Int, local: Int)] {
        var counts: [LaneID: (upstream: Int, local: Int)] = [:]
        for operation in operations.values {
            counts[operation.lane, default: (0, 0)].upstream += 1
            counts[operation.lane, default: (0, 0)].local += operation.subscribers.count
        }
        return counts
    }

    /// Lane `lane` is gone (its upstream was removed): every operation on it ends with
    /// `failure` for each subscriber, and it takes no new one.
    package mutating func endLane(_ lane: LaneID, _ failure: TransportFailure) -> [Action] {
        var actions: [Action] = []
        for id in operations.keys.sorted(by: { $0.value < $1.value }) where operations[id]?.lane == lane {
            actions += upstreamFinished(id, .error(.transport(failure)))
        }
        placers[lane] = nil
        return actions
    }

    // MARK: - Events from clients

    /// Whether `client` may start an operation named `localID` now: nil, or why not.
    package func admission(client: Client, localID: String) -> Refusal? {
        if shuttingDown { return .shuttingDown }
        guard let own = clients[client] else { return maxOperationsPerClient > 0 ? nil : .tooManyOperations(limit: maxOperationsPerClient) }
        if own[localID] != nil { return .duplicateID }
        if own.count >= maxOperationsPerClient { return .tooManyOperations(limit: maxOperationsPerClient) }
        return nil
    }

    /// A client asks for an operation. `key` is the dedup key of a subscription (nil: never
    /// shared, as for queries and mutations); `payload` is what goes upstream if it opens.
    package mutating func subscribe(
        client: Client,
        localID: String,
        kind: OperationKind,
        key: DedupKey?,
        payload: ByteBuffer = ByteBuffer(),
        tag: Tag,
        replay: Bool = false,
        snapshot: ByteBuffer? = nil,
        resumingSince: Instant? = nil,
        now: Instant? = nil,
        lane: LaneID = .primary
    ) -> [Action] {
        if let refusal = admission(client: client, localID: localID) { return [.refuse(client: client, localID: localID, refusal)] }
        let sharedKey = kind == .subscription ? key.map { LaneKey(lane: lane, key: $0) } : nil
        let subscriber = Subscriber(client: client, localID: localID, tag: tag)
        if let sharedKey, let id = byKey[sharedKey] {
            operations[id]!.subscribers.append(subscriber)
            clients[client, default: [:]][localID] = id
            if let snapshot { addSnapshotRequest(snapshot, for: subscriber.key, on: id) }
            let operation = operations[id]!
            if let since = resumingSince {
                let resumed = Action.resumed(id, subscriber: subscriber, subscribers: operation.subscribers.count)
                guard operation.state == .active else {
                    downSince[id] = min(downSince[id] ?? since, since)
                    return [resumed]
                }
                // The stream is back already: this subscriber's gap ends now.
                return [resumed, .tellState(subscriber, .active, gap: now.map { max($0 - since, .zero) })]
            }
            var actions: [Action] = [.joined(id, subscriber: subscriber, state: operation.state, subscribers: operation.subscribers.count)]
            if replay, operation.state == .active, let last = lastResults[id] { actions.append(.replay(subscriber, last)) }
            return actions
        }
        guard let placement = placers[lane]?.place(kind) else { return [.refuse(client: client, localID: localID, .upstreamFull)] }
        let id = OperationID(nextID)
        nextID += 1
        operations[id] = Operation(
            kind: kind,
            lane: lane,
            placement: placement,
            key: sharedKey?.key,
            subscribers: [subscriber],
            payload: kind == .subscription ? payload : ByteBuffer(),
            resuming: resumingSince != nil
        )
        if let since = resumingSince, kind == .subscription { downSince[id] = since }
        if let sharedKey { byKey[sharedKey] = id }
        clients[client, default: [:]][localID] = id
        if let snapshot, sharedKey != nil { addSnapshotRequest(snapshot, for: subscriber.key, on: id) }
        return [.open(id, kind: kind, payload: payload, on: placement, first: subscriber, lane: lane)]
    }

    /// A client completes one of its operations (unknown ids are ignored: it may have ended).
    package mutating func complete(client: Client, localID: String) -> [Action] {
        guard let id = clients[client]?.removeValue(forKey: localID) else { return [] }
        if clients[client]?.isEmpty == true { clients[client] = nil }
        return leave(id, client: client, localID: localID)
    }

    /// A client is gone: each of its operations loses a subscriber.
    package mutating func clientGone(_ client: Client) -> [Action] {
        guard let own = clients.removeValue(forKey: client) else { return [] }
        var actions: [Action] = []
        for (localID, id) in own.sorted(by: { $0.key < $1.key }) { actions += leave(id, client: client, localID: localID) }
        return actions
    }

    private mutating func leave(_ id: OperationID, client: Client, localID: String) -> [Action] {
        guard var operation = operations[id] else { return [] }
        operation.subscribers.removeAll { $0.client == client && $0.localID == localID }
        removeSnapshotReader(SubscriberKey(client: client, localID: localID), of: id)
        guard operation.subscribers.isEmpty else {
            operations[id] = operation
            return []
        }
        forget(id)
        return [.close(id, on: operation.placement, lane: operation.lane)]
    }

    // MARK: - Events from upstream

    /// The upstream operation changed state at `now`. Subscriptions tell their subscribers; a
    /// query or mutation just answers. A stream that goes down forgets its latest result (it
    /// may be stale when the stream is back); back to `active`, it tells how long it was down.
    package mutating func upstreamState(_ id: OperationID, _ state: OperationState, now: Instant? = nil) -> [Action] {
        guard var operation = operations[id] else { return [] }
        var gap: Duration?
        if state == .active {
            if let since = downSince.removeValue(forKey: id), let now { gap = max(now - since, .zero) }
        } else {
            if operation.state == .active, downSince[id] == nil, let now { downSince[id] = now }
            forgetLast(id)
        }
        let quiet = operation.resuming && state == .pending
        if state == .active { operation.resuming = false }
        operation.state = state
        operations[id] = operation
        guard operation.kind == .subscription, !quiet else { return [] }
        var actions: [Action] = operation.subscribers.map { .tellState($0, state, gap: gap) }
        if gap != nil { actions += openSnapshots(of: id) }
        return actions
    }

    // MARK: - Snapshots at resumes (resnapshot)

    private mutating func addSnapshotRequest(_ payload: ByteBuffer, for reader: SubscriberKey, on id: OperationID) {
        if let index = snapshotRequests[id]?.firstIndex(where: { $0.payload == payload }) {
            snapshotRequests[id]![index].readers.append(reader)
        } else {
            snapshotRequests[id, default: []].append(SnapshotRequest(payload: payload, readers: [reader]))
        }
    }

    private mutating func removeSnapshotReader(_ reader: SubscriberKey, of id: OperationID) {
        if var requests = snapshotRequests[id] {
            for index in requests.indices { requests[index].readers.removeAll { $0 == reader } }
            requests.removeAll { $0.readers.isEmpty }
            snapshotRequests[id] = requests.isEmpty ? nil : requests
        }
        if holds[id] != nil {
            holds[id]!.waiting.remove(reader)
            if holds[id]!.waiting.isEmpty { holds[id] = nil }
        }
    }

    /// The stream resumed after a gap: each distinct snapshot query its subscribers named is
    /// sent once, and their results of the stream are held until it answers.
    private mutating func openSnapshots(of stream: OperationID) -> [Action] {
        var actions: [Action] = []
        for request in snapshotRequests[stream] ?? [] {
            guard let streamOperation = operations[stream],
                let first = streamOperation.subscribers.first(where: { request.readers.contains($0.key) }),
                let placement = placers[streamOperation.lane]?.place(.query)
            else { continue }
            let id = OperationID(nextID)
            nextID += 1
            operations[id] = Operation(kind: .query, lane: streamOperation.lane, placement: placement, key: nil)
            snapshotQueries[id] = (stream, request.readers)
            holds[stream, default: Hold()].waiting.formUnion(request.readers)
            actions.append(.open(id, kind: .query, payload: request.payload, on: placement, first: first, lane: streamOperation.lane))
        }
        return actions
    }

    /// Whether some subscribers of `stream` wait for their snapshot (its results are then
    /// delivered to the others only, and held for them: ``hold(_:_:)``).
    package func isHolding(_ stream: OperationID) -> Bool { holds[stream] != nil }

    /// The subscribers of `stream` that wait for their snapshot.
    package func waiting(on stream: OperationID) -> Set<SubscriberKey> { holds[stream]?.waiting ?? [] }

    /// A result of `stream` while some of its subscribers wait for their snapshot: kept for
    /// them (a copy). Past ``maxHeldResults`` or ``maxHeldBytes`` they get what is held at once.
    package mutating func hold(_ stream: OperationID, _ payload: ByteBuffer) -> [Action] {
        guard var hold = holds.removeValue(forKey: stream) else { return [] }
        var copy = ByteBuffer()
        copy.writeImmutableBuffer(payload)
        hold.results.append(copy)
        hold.bytes += copy.readableBytes
        holds[stream] = hold
        guard hold.results.count >= Self.maxHeldResults || hold.bytes >= Self.maxHeldBytes else { return [] }
        return release(stream, hold.waiting)
    }

    /// Whether operation `id` is a snapshot query.
    package func isSnapshot(_ id: OperationID) -> Bool { snapshotQueries[id] != nil }

    /// The snapshot query `id` answered: each of its readers still subscribed gets it, then
    /// the results held for it.
    package mutating func snapshotAnswered(_ id: OperationID, _ payload: ByteBuffer) -> [Action] {
        guard let query = snapshotQueries.removeValue(forKey: id) else { return [] }
        var actions: [Action] = []
        for subscriber in operations[query.stream]?.subscribers ?? [] where query.readers.contains(subscriber.key) {
            actions.append(.snapshot(subscriber, payload))
        }
        return actions + release(query.stream, Set(query.readers))
    }

    /// `readers` of `stream` wait no more: each gets the results held for it, in order.
    private mutating func release(_ stream: OperationID, _ readers: Set<SubscriberKey>) -> [Action] {
        guard let hold = holds[stream] else { return [] }
        let released = hold.waiting.intersection(readers)
        var actions: [Action] = []
        for subscriber in operations[stream]?.subscribers ?? [] where released.contains(subscriber.key) {
            actions += hold.results.map { .deliverHeld(subscriber, $0) }
        }
        var rest = hold
        rest.waiting.subtract(released)
        holds[stream] = rest.waiting.isEmpty ? nil : rest
        return actions
    }

    // MARK: - Latest results (replays)

    /// Whether operation `id` keeps its latest result: every active deduplicated subscription
    /// does, so that any joiner may ask for it, whoever subscribed first.
    package func keepsLast(_ id: OperationID) -> Bool {
        guard let operation = operations[id] else { return false }
        return operation.key != nil && operation.state == .active
    }

    /// A result of operation `id`: kept (copied) as its latest when ``keepsLast(_:)`` and when
    /// ``retainedBytes`` stays within `budget`; else the older one is forgotten too (a stale
    /// replay is worse than none).
    package mutating func remember(_ id: OperationID, _ payload: ByteBuffer, budget: Int) {
        guard keepsLast(id) else { return }
        let old = lastResults[id]?.readableBytes ?? 0
        guard retainedBytes - old + payload.readableBytes <= budget else { return forgetLast(id) }
        retainedBytes += payload.readableBytes - old
        if lastResults[id] == nil { lastResults[id] = ByteBuffer() }
        // Mutated in place in the dictionary: its storage is reused, not reallocated.
        lastResults[id]!.clear(minimumCapacity: payload.readableBytes)
        lastResults[id]!.writeImmutableBuffer(payload)
    }

    /// Forgets every kept result (the memory budget needs the room); returns the bytes freed.
    package mutating func forgetLastResults() -> Int {
        let freed = retainedBytes
        lastResults.removeAll()
        retainedBytes = 0
        return freed
    }

    private mutating func forgetLast(_ id: OperationID) {
        guard let last = lastResults.removeValue(forKey: id) else { return }
        retainedBytes -= last.readableBytes
    }

    /// The server of operation `id`'s connection refused it: that connection holds no more than
    /// it does now. The subscription opens on another connection (a new one while fewer than
    /// `max_connections` exist), the same operation for the same subscribers; when the pool is
    /// full it ends with a transport error.
    package mutating func carrierFull(_ id: OperationID) -> [Action] {
        guard var operation = operations[id], case .connection(let index) = operation.placement, let first = operation.subscribers.first else {
            return upstreamFinished(id, .error(.transport(.connectionLost(reason: "the upstream refused the operation: its connection is full"))))
        }
        // It holds one fewer than it counts now (this one, refused).
        let old = operation.placement
        let lane = operation.lane
        placers[lane]?.refuse(above: index)
        guard let placement = placers[lane]?.place(operation.kind) else {
            return upstreamFinished(
                id,
                .error(.transport(.connectionLost(reason: "every upstream connection is full (the server refused one more subscription)")))
            )
        }
        operation.placement = placement
        operations[id] = operation
        placers[lane]?.remove(old)
        return [.open(id, kind: operation.kind, payload: operation.payload, on: placement, first: first, lane: lane)]
    }

    /// The upstream operation ended (completed, error, cancelled): every subscriber is told and
    /// its local id is free again.
    package mutating func upstreamFinished(_ id: OperationID, _ finish: OperationFinish) -> [Action] {
        guard let operation = operations[id] else { return [] }
        forget(id)
        if let query = snapshotQueries.removeValue(forKey: id) {
            // A snapshot that never answered: its readers get what was held, without it.
            return release(query.stream, Set(query.readers)) + [.finished(id, finish, subscribers: 0, lane: operation.lane)]
        }
        var actions: [Action] = operation.subscribers.map { subscriber in
            release(subscriber, id)
            return .finish(subscriber, finish)
        }
        actions.append(.finished(id, finish, subscribers: operation.subscribers.count, lane: operation.lane))
        return actions
    }

    // MARK: - Shutdown

    /// The daemon stops: every local operation is told, nothing is closed upstream one by one
    /// (the connections close), and every later `subscribe` is refused.
    package mutating func shutDown() -> [Action] {
        shuttingDown = true
        var actions: [Action] = []
        for id in operations.keys.sorted(by: { $0.value < $1.value }) {
            actions += operations[id]!.subscribers.map { .shutDown($0) }
        }
        operations.removeAll()
        byKey.removeAll()
        clients.removeAll()
        for lane in placers.keys { placers[lane]!.removeAll() }
        retainedBytes = 0
        lastResults.removeAll()
        downSince.removeAll()
        snapshotRequests.removeAll()
        snapshotQueries.removeAll()
        holds.removeAll()
        return actions
    }

    private mutating func forget(_ id: OperationID) {
        guard let operation = operations.removeValue(forKey: id) else { return }
        forgetLast(id)
        downSince[id] = nil
        snapshotRequests[id] = nil
        holds[id] = nil
        if let key = operation.key, byKey[LaneKey(lane: operation.lane, key: key)] == id { byKey[LaneKey(lane: operation.lane, key: key)] = nil }
        placers[operation.lane]?.remove(operation.placement)
    }

    private mutating func release(_ subscriber: Subscriber, _ id: OperationID) {
        guard clients[subscriber.client]?[subscriber.localID] == id else { return }
        clients[subscriber.client]![subscriber.localID] = nil
        if clients[subscriber.client]!.isEmpty { clients[subscriber.client] = nil }
    }
}

extension Multiplexer.Action: Equatable where Client: Equatable, Tag: Equatable {}
extension Multiplexer.Subscriber: Equatable where Tag: Equatable {}
