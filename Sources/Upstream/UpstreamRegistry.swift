import AWSSigning
import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPFields
import NIOCore

/// Every upstream gqlmuxd talks to, by name, and every lane of each: one set of carriers
/// (``UpstreamCarriers``) per upstream and identity. An upstream with `identity = "host"` has
/// one lane, made at start; one with `"client"` or `"peer"` has a lane per credential in use,
/// made when its first client asks and closed `lazy_close_timeout` after its last leaves. The
/// daemon drives all of them through this (start, pause, resume, reload, shut down), and the
/// fan-out performs the multiplexer's placements through it (``UpstreamOperations``).
///
/// Lives on one event loop, as its carriers do.
package final class UpstreamRegistry {
    /// The name of the upstream `[upstream]` configures.
    package static let defaultName = "default"

    /// One upstream of the table, ready to make lanes of.
    package struct Definition {
        package var name: String
        package var prepared: PreparedUpstream
        package var layout: UpstreamLayout
        /// One lane for every client (`identity = "host"`), or one per credential.
        package var perCredential: Bool

        package init(name: String, prepared: PreparedUpstream, layout: UpstreamLayout, perCredential: Bool) {
            self.name = name
            self.prepared = prepared
            self.layout = layout
            self.perCredential = perCredential
        }
    }

    /// One upstream with one identity's credentials.
    package final class Lane {
        package let id: LaneID
        package let upstream: String
        /// nil for the host's lane; otherwise the credential its connections carry.
        let credential: LaneCredential?
        /// Names the credential without telling it (an HMAC under a key of this process).
        package let identity: String?
        package let carriers: UpstreamCarriers
        /// Sessions that may use it (identity lanes only).
        var holders = 0
        var closing: Scheduled<Void>?
        /// It waits in its upstream's start queue for a token (``LanePacing``): no connection yet.
        var queued = false
        /// Operations placed on it while it waits, sent when it starts.
        var waiting: [(id: OperationID, kind: OperationKind, payload: ByteBuffer, placement: Placement)] = []

        init(id: LaneID, upstream: String, credential: LaneCredential?, identity: String?, carriers: UpstreamCarriers) {
            self.id = id
            self.upstream = upstream
            self.credential = credential
            self.identity = identity
            self.carriers = carriers
        }
    }

    /// Where a client's operations for an upstream go.
    package enum Choice: Equatable {
        /// Lane `id`; `new` names a lane made for this ask (its layout is to be set).
        case lane(LaneID, new: UpstreamLayout?)
        /// No upstream by that name.
        case unknownUpstream
        /// Another identity would pass `[limits] max_identities`.
        case tooManyIdentities(limit: Int)
    }

    /// A lane's names, as its transport events carry them.
    package struct Label: Sendable {
        package let id: LaneID
        package let upstream: String
        /// The identity's short name; nil for the host's lane.
        package let identity: String?
    }

    package typealias Observer = @Sendable (_ lane: Label, _ connection: Int, TransportEvent) -> Void

    package let eventLoop: any EventLoop
    private var definitions: [Definition]
    private var lanes: [LaneID: Lane] = [:]
    private var hostLanes: [String: LaneID] = [:]
    private struct IdentityKey: Hashable {
        let upstream: String
        let credential: LaneCredential
    }
    private var identityLanes: [IdentityKey: LaneID] = [:]
    private var nextLane = 0
    private let updates: OperationSink
    private let readEnded: ReadEndSink
    private var observer: Observer = { _, _, _ in }
    private var started = false
    /// Upstreams an admin paused: their lanes, new ones too, stay paused until resumed.
    private var paused: Set<String> = []
    private let identityKey: [UInt8] = (0..<32).map { _ in UInt8.random(in: 0...255) }
    /// `[limits] max_identities`: identity lanes at once, over every upstream (a reload may
    /// change it).
    package var maxIdentities: Int
    /// An identity lane closed (its last client left): the multiplexer forgets its places.
    package var laneClosed: (LaneID) -> Void = { _ in }
    /// Each upstream's start tokens for new identity lanes, and the lanes waiting for one, in
    /// the order they were made (a lane forgotten while it waits leaves the queue, taking none).
    private struct StartQueue {
        var pacing: LanePacing
        var lanes: [LaneID] = []
        var timer: Scheduled<Void>?
    }
    private var startQueues: [String: StartQueue] = [:]

    /// The upstreams of the table, `[upstream]` first: a lane for each that serves every client
    /// alike. Their carriers tell every operation's updates to `updates`.
    /// - Parameter maxIdentities: identity lanes at once, over every upstream.
    package init(
        _ definitions: [Definition],
        maxIdentities: Int = 256,
        eventLoop: any EventLoop,
        readEnded: @escaping ReadEndSink,
        updates: @escaping OperationSink
    ) {
        precondition(definitions.first?.name == Self.defaultName, "the table starts with the default upstream")
        self.maxIdentities = maxIdentities
        self.eventLoop = eventLoop
        self.definitions = definitions
        self.updates = updates
        self.readEnded = readEnded
        // Lane 0 is the default upstream's host lane, when it has one.
        if definitions[0].perCredential { nextLane = 1 }
        for definition in definitions where !definition.perCredential { _ = makeLane(definition, credential: nil) }
    }

    /// The upstream `[upstream]` configures, alone (tests, the bench).
    package convenience init(
        _ upstream: PreparedUpstream,
        layout: UpstreamLayout = UpstreamLayout(),
        eventLoop: any EventLoop,
        updates: @escaping OperationSink
    ) {
        self.init(
            [Definition(name: Self.defaultName, prepared: upstream, layout: layout, perCredential: false)],
            eventLoop: eventLoop,
            readEnded: {},
            updates: updates
        )
    }

    private func makeLane(_ definition: Definition, credential: LaneCredential?, paced: Bool = false) -> Lane {
        let id = LaneID(nextLane)
        nextLane += 1
        let prepared = credential.map { definition.prepared.carrying($0) } ?? definition.prepared
        let carriers = UpstreamCarriers(prepared, eventLoop: eventLoop, readEnded: readEnded, updates: updates)
        let lane = Lane(id: id, upstream: definition.name, credential: credential, identity: credential.map(tag), carriers: carriers)
        carriersObserve(lane, observer)
        lanes[id] = lane
        if let credential {
            identityLanes[IdentityKey(upstream: definition.name, credential: credential)] = id
        } else {
            hostLanes[definition.name] = id
        }
        guard started else { return lane }
        // An identity lane made while running takes a start token of its upstream, or waits
        // for one: lanes that churn open connections no faster than the upstream's reconnects.
        guard credential != nil, paced else {
            startLane(lane)
            return lane
        }
        let now = NIODeadline.now().uptimeNanoseconds
        let interval = LanePacing.nanoseconds(definition.prepared.configuration.transport.backoff.initial ?? .seconds(1))
        var queue = startQueues[definition.name] ?? StartQueue(pacing: LanePacing(interval: .nanoseconds(Int64(interval)), now: now))
        queue.pacing.retime(interval: interval, now: now)
        if queue.lanes.isEmpty, queue.pacing.take(now: now) {
            startQueues[definition.name] = queue
            startLane(lane)
        } else {
            lane.queued = true
            queue.lanes.append(id)
            startQueues[definition.name] = queue
            armStartTimer(definition.name)
        }
        return lane
    }

    /// The timer of upstream `name`'s start queue, set for its next token while lanes wait.
    private func armStartTimer(_ name: String) {
        guard var queue = startQueues[name], queue.timer == nil, !queue.lanes.isEmpty else { return }
        let wait = queue.pacing.untilNext(now: NIODeadline.now().uptimeNanoseconds)
        let registry = NIOLoopBound(self, eventLoop: eventLoop)
        queue.timer = eventLoop.scheduleTask(in: .nanoseconds(Int64(wait))) { registry.value.serveStartQueue(name) }
        startQueues[name] = queue
    }

    /// Starts the lanes at the head of upstream `name`'s queue that a token is there for.
    private func serveStartQueue(_ name: String) {
        guard var queue = startQueues[name] else { return }
        queue.timer = nil
        let now = NIODeadline.now().uptimeNanoseconds
        var starting: [Lane] = []
        while let id = queue.lanes.first, queue.pacing.take(now: now) {
            queue.lanes.removeFirst()
            if let lane = lanes[id] { starting.append(lane) }
        }
        startQueues[name] = queue
        for lane in starting { startLane(lane) }
        armStartTimer(name)
    }

    private func startLane(_ lane: Lane) {
        lane.queued = false
        lane.carriers.start()
        if paused.contains(lane.upstream) { lane.carriers.pause() }
        let waiting = lane.waiting
        lane.waiting = []
        for operation in waiting {
            _ = lane.carriers.openOnLoop(operation.id, kind: operation.kind, payload: operation.payload, on: operation.placement)
        }
    }

    /// 12 hex digits naming `credential` in status, metrics and the journal.
    private func tag(_ credential: LaneCredential) -> String {
        var text = ""
        switch credential.payload {
        case .configured: text += "c"
        case .inline(let bytes): text += "i" + String(decoding: bytes, as: UTF8.self)
        case .file(let path): text += "f" + path
        }
        for header in credential.headers { text += "\n" + header.name + ":" + header.value }
        return String(SHA256.hex(SHA256.hmac(key: identityKey, Array(text.utf8))).prefix(12))
    }

    // MARK: - Names and lanes

    /// The upstreams' names, in configuration order.
    package var names: [String] { definitions.map(\.name) }

    /// The definition of upstream `name`.
    package func definition(named name: String) -> Definition? { definitions.first { $0.name == name } }

    /// The host lane of upstream `name`, if it serves every client alike.
    package func carriers(named name: String) -> UpstreamCarriers? { hostLanes[name].flatMap { lanes[$0]?.carriers } }

    /// The default upstream's host lane (the default upstream with `identity = "host"`).
    package var primary: UpstreamCarriers? { lanes[.primary]?.carriers }

    package func lane(_ id: LaneID) -> Lane? { lanes[id] }

    /// Every lane of upstream `name`, the host's first.
    package func lanes(of name: String) -> [Lane] {
        lanes.values.filter { $0.upstream == name }.sorted { $0.id.value < $1.id.value }
    }

    /// Every lane, in the order they were made.
    package var allLanes: [Lane] { lanes.values.sorted { $0.id.value < $1.id.value } }

    /// Where operations for upstream `name` go for a client presenting `credential` (ignored
    /// by an upstream that serves every client alike). An identity's lane is made when first
    /// asked for; the caller holds it (``hold(_:)``) while its client may use it. A new one
    /// opens its first connection when its upstream gives it a start slot (``LanePacing``),
    /// unless not `paced` (a carried client's lanes, made again after a restart).
    package func choose(upstream name: String, credential: LaneCredential?, paced: Bool = true) -> Choice {
        eventLoop.assertInEventLoop()
        guard let definition = definition(named: name) else { return .unknownUpstream }
        guard definition.perCredential else {
            guard let id = hostLanes[name] else { return .unknownUpstream }
            return .lane(id, new: nil)
        }
        let credential = credential ?? LaneCredential()
        if let id = identityLanes[IdentityKey(upstream: name, credential: credential)] { return .lane(id, new: nil) }
        guard identityLanes.count < maxIdentities else { return .tooManyIdentities(limit: maxIdentities) }
        return .lane(makeLane(definition, credential: credential, paced: paced).id, new: definition.layout)
    }

    /// The identity lane of `credential` on upstream `name`, if one is live.
    package func identityLane(upstream name: String, credential: LaneCredential) -> LaneID? {
        identityLanes[IdentityKey(upstream: name, credential: credential)]
    }

    /// A client may use identity lane `id` (nothing for a host lane).
    package func hold(_ id: LaneID) {
        guard let lane = lanes[id], lane.credential != nil else { return }
        lane.holders += 1
        lane.closing?.cancel()
        lane.closing = nil
    }

    /// A client of identity lane `id` left: its last one's leaving closes the lane's
    /// connections after the upstream's `lazy_close_timeout`.
    package func release(_ id: LaneID) {
        guard let lane = lanes[id], lane.credential != nil, lane.holders > 0 else { return }
        lane.holders -= 1
        guard lane.holders == 0 else { return }
        let wait = lane.carriers.lazyCloseTimeout
        // The registry lives on its loop; the timer fires there.
        let registry = NIOLoopBound(self, eventLoop: eventLoop)
        lane.closing = eventLoop.scheduleTask(in: .nanoseconds(Int64(wait.components.seconds) * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000)) {
            registry.value.closeIdentity(id)
        }
    }

    private func closeIdentity(_ id: LaneID) {
        guard let lane = lanes[id], lane.holders == 0 else { return }
        forget(lane)
        laneClosed(id)
        _ = lane.carriers.shutdownOnLoop()
    }

    private func forget(_ lane: Lane) {
        lane.closing?.cancel()
        if lane.queued {
            // It leaves its queue without a token: it never connected.
            startQueues[lane.upstream]?.lanes.removeAll { $0 == lane.id }
            lane.queued = false
            lane.waiting = []
        }
        lanes[lane.id] = nil
        if let credential = lane.credential {
            identityLanes[IdentityKey(upstream: lane.upstream, credential: credential)] = nil
        } else if hostLanes[lane.upstream] == lane.id {
            hostLanes[lane.upstream] = nil
        }
    }

    /// Every carrier's transport events, with the lane they concern.
    package func observe(_ observer: @escaping Observer) {
        self.observer = observer
        for lane in lanes.values {
            carriersObserve(lane, observer)
        }
    }

    private func carriersObserve(_ lane: Lane, _ observer: @escaping Observer) {
        let label = Label(id: lane.id, upstream: lane.upstream, identity: lane.identity)
        lane.carriers.observer = { connection, event in observer(label, connection, event) }
    }

    // MARK: - Life

    package func start() {
        started = true
        for lane in allLanes { lane.carriers.start() }
    }

    /// Closes every upstream's subscriptions and holds them until ``resume()``.
    package func pause() { _ = pause(upstream: nil) }

    package func resume() { _ = resume(upstream: nil) }

    /// Closes upstream `name`'s subscriptions (nil: every upstream's) and holds them until it is
    /// resumed; false when no upstream has that name.
    package func pause(upstream name: String?) -> Bool { hold(true, upstream: name) }

    /// Resumes upstream `name` (nil: every one); false when no upstream has that name.
    package func resume(upstream name: String?) -> Bool { hold(false, upstream: name) }

    private func hold(_ pause: Bool, upstream name: String?) -> Bool {
        let names = name.map { [$0] } ?? self.names
        guard names.allSatisfy({ definition(named: $0) != nil }) else { return false }
        if pause { paused.formUnion(names) } else { paused.subtract(names) }
        // A lane still waiting for its start slot takes the pause when it starts.
        for lane in allLanes where names.contains(lane.upstream) && !lane.queued {
            if pause { lane.carriers.pause() } else { lane.carriers.resume() }
        }
        return true
    }

    /// A reload's table, its file I/O done: upstreams kept take their new settings (each
    /// identity's lane with its own credential), new ones get their host lane. Returns every
    /// lane whose layout is new or changed, and the lanes of removed upstreams: the caller ends
    /// their operations, then ``retireOnLoop(_:)``s them. Cannot fail.
    package func applyOnLoop(_ table: [Definition]) -> (layouts: [LaneID: UpstreamLayout], removed: [LaneID]) {
        eventLoop.assertInEventLoop()
        let names = Set(table.map(\.name))
        let removed = allLanes.filter { !names.contains($0.upstream) }.map(\.id)
        let old = definitions
        definitions = table
        var layouts: [LaneID: UpstreamLayout] = [:]
        for definition in table {
            let existing = lanes(of: definition.name)
            if existing.isEmpty, !definition.perCredential {
                layouts[makeLane(definition, credential: nil).id] = definition.layout
                continue
            }
            // An upstream whose keys did not change keeps its connections as they are, unless
            // it reads a file a reload is meant to pick up again.
            let configuration = definition.prepared.configuration
            let unchanged = old.first { $0.name == definition.name }?.prepared.configuration == configuration && !configuration.readsFiles
            for lane in existing {
                layouts[lane.id] = definition.layout
                if unchanged, lane.credential?.readsFile != true { continue }
                lane.carriers.applyOnLoop(lane.credential.map { definition.prepared.carrying($0) } ?? definition.prepared)
            }
        }
        return (layouts, removed)
    }

    /// Shuts down lanes of removed upstreams (their operations already ended).
    package func retireOnLoop(_ ids: [LaneID]) -> EventLoopFuture<Void> {
        var closing: [EventLoopFuture<Void>] = []
        for id in ids {
            guard let lane = lanes[id] else { continue }
            forget(lane)
            closing.append(lane.carriers.shutdownOnLoop())
        }
        return .andAllComplete(closing, on: eventLoop)
    }

    /// Ends every operation of every upstream and closes every connection; done when every
    /// socket is closed.
    package func shutdownOnLoop() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        // Lanes still waiting for a start token never connect.
        for name in startQueues.keys { startQueues[name]?.timer?.cancel() }
        startQueues = [:]
        for lane in allLanes where lane.queued {
            lane.queued = false
            lane.waiting = []
        }
        return .andAllComplete(allLanes.map { $0.carriers.shutdownOnLoop() }, on: eventLoop)
    }
}

/// What the fan-out asks of the upstream side: send an operation where the multiplexer core
/// placed it, cancel it there, and name the carrier for the journal.
package protocol UpstreamOperations: AnyObject {
    /// Sends operation `id` on the carrier at `placement` of `lane`; false when there is none.
    func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement, lane: LaneID) -> Bool
    /// The multiplexer no longer wants operation `id`.
    func cancelOnLoop(_ id: OperationID, on placement: Placement, lane: LaneID)
    /// The carrier's name for the journal (`GQLMUX_TRANSPORT=`).
    func carrierName(at placement: Placement, lane: LaneID) -> String?
    /// The name of the upstream of `lane` (`GQLMUX_UPSTREAM=`).
    func upstreamName(of lane: LaneID) -> String?
}

extension UpstreamRegistry: UpstreamOperations {
    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement, lane: LaneID) -> Bool {
        guard let lane = lanes[lane] else { return false }
        // A lane waiting for its start slot opens no connection yet: its operations wait, pending.
        if lane.queued {
            lane.waiting.append((id, kind, payload, placement))
            updates(id, .state(.pending))
            return true
        }
        return lane.carriers.openOnLoop(id, kind: kind, payload: payload, on: placement)
    }

    package func cancelOnLoop(_ id: OperationID, on placement: Placement, lane: LaneID) {
        guard let lane = lanes[lane] else { return }
        if let index = lane.waiting.firstIndex(where: { $0.id == id }) {
            lane.waiting.remove(at: index)
            return
        }
        lane.carriers.cancelOnLoop(id, on: placement)
    }

    package func carrierName(at placement: Placement, lane: LaneID) -> String? {
        lanes[lane]?.carriers.carrierName(at: placement)
    }

    package func upstreamName(of lane: LaneID) -> String? { lanes[lane]?.upstream }
}
