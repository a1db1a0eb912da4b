import EndpointServer
import GQLMuxVocabulary
import GraphQLTransportWS
import Handover
import LocalEndpoint
import LocalProtocol
import Multiplexing
import NIOCore
import RequestValidation

#if canImport(Glibc)
import Glibc
#endif

/// One local client connection: parses its lines, owns its operations, writes to it.
///
/// `@unchecked Sendable` — safe because NIO calls a channel handler only on its channel's
/// loop (the daemon's), and the daemon and fan-out call it from that loop too: `send`, `flush`
/// and `fail` check `eventLoop.assertInEventLoop()` (debug builds and tests); the hot path's
/// `writeNext` is called only from the fan-out's deliveries, whose entry (`Switchboard.upstream`)
/// makes the same check, so a delivery pays for no check of its own.
final class ClientSession: ChannelInboundHandler, EndpointSession, @unchecked Sendable {
    typealias InboundIn = ClientRequest
    typealias OutboundOut = ByteBuffer

    /// The control plane (admin verbs, status, counting sessions); the daemon owns this
    /// session's channel, so it outlives the session.
    private unowned let host: any SessionHost
    private let switchboard: Switchboard
    private let budget: MemoryBudget
    /// The memory of a written batch, reused for the next large one (``BatchSpare``).
    private let spare: BatchSpare
    private let events: DaemonEvents
    private let metrics: DaemonMetrics
    let channel: any Channel
    var eventLoop: any EventLoop { channel.eventLoop }
    private(set) var credentials: PeerCredentials?
    var name = ""
    /// Once closing (error, slow consumer, shutdown) nothing more is written.
    private var closing = false
    /// Whether this session is ending (a restart does not carry it).
    var isClosing: Bool { closing }
    /// Lines written since the last flush, sent as one write.
    private var batch = ClientSession.emptyBatch
    /// Buffers queued before `batch` in this turn: earlier batch parts and large upstream
    /// payloads passed by reference, so N clients behind on one message share its bytes. A
    /// `shared` part of an HTTP stream is not a sealed chunk: the HTTP codec chunks it.
    private var queued: [(bytes: ByteBuffer, shared: Bool)] = []
    /// Bytes NIO holds for this client, unwritten, as of the last flush or refresh.
    private(set) var buffered = 0
    /// Set while the fan-out holds this session in its list to flush at the end of the loop turn.
    var awaitingFlush = false

    /// Where the client came in.
    typealias Origin = ClientOrigin

    /// Its share of the memory budget for what it has not finished sending (a partial line or
    /// frame): such a client cannot be carried over a restart.
    var inbound: (any InboundBudget)?

    /// Whether it holds part of a line or frame it has not finished sending.
    var holdsPartialInput: Bool { (inbound?.held ?? 0) > 0 }

    /// The handler that owns this client's wire: what the online restart asks whether, and
    /// as what, the client can be carried.
    var wire: (any CarriedConnection)?

    let origin: Origin
    private var opened = false

    /// What this client presents for upstreams with `identity = "client"`: a line client's
    /// `connection_init` `payload.upstream`; an endpoint client's WebSocket `connection_init`
    /// payload and its request headers. Set through ``present(_:)`` only.
    private(set) var presented = PresentedCredential()
    /// Why the credential this client last presented is not kept (over `max_credential_bytes`,
    /// or the memory budget): each subscribe that would need it is refused with this.
    private(set) var presentedRefusal: String?
    /// The identity lanes this client may use (held in the registry until it leaves).
    private(set) var heldLanes: Set<LaneID> = []
    /// What this client presented when it was given each lane of an `identity = "client"`
    /// upstream it holds: a restart makes each subscription's lane again with it, so a
    /// subscription keeps its identity when the client has presented another since.
    private(set) var presentedForLane: [LaneID: PresentedCredential] = [:]
    /// Bytes of those that are not ``presented`` (kept only for the lanes the client still
    /// holds), counted in the memory budget beside it.
    private var earlierBytes = 0

    /// Records that this client uses identity lane `lane`, given it while presenting
    /// `presented` (nil: a lane that credential does not pick); true the first time.
    func holdLane(_ lane: LaneID, presented: PresentedCredential?) -> Bool {
        if let presented, presentedForLane[lane] == nil { presentedForLane[lane] = presented }
        return heldLanes.insert(lane).inserted
    }

    /// Counts in the budget the credentials kept for held lanes that are not ``presented``.
    /// They are kept whatever the budget says: operations open on their lanes depend on them.
    private func countEarlierCredentials() {
        var seen: [PresentedCredential] = []
        var bytes = 0
        for credential in presentedForLane.values where credential != presented && !seen.contains(credential) {
            seen.append(credential)
            bytes += credential.byteCount
        }
        _ = budget.credentialsChanged(by: bytes - earlierBytes, whatever: true)
        earlierBytes = bytes
    }

    /// Replaces what this client presents. Kept only while some upstream has
    /// `identity = "client"`, only up to `[limits] max_credential_bytes`, and counted in the
    /// memory budget. The lanes of the credential it replaces are let go of where none of this
    /// client's operations use them: a client holds one credential at a time.
    func present(_ credential: PresentedCredential) {
        budget.credentialsChanged(by: -presented.byteCount)
        presented = PresentedCredential()
        presentedRefusal = nil
        if let limit = host.credentialLimit, !credential.isEmpty {
            let size = credential.byteCount
            if size > limit {
                presentedRefusal = "the credential presented (\(size) bytes) is over [limits] max_credential_bytes (\(limit))"
            } else if !budget.credentialsChanged(by: size) {
                presentedRefusal = "the daemon's memory budget (total_buffer_bytes) cannot hold the credential presented now; try again later"
            } else {
                presented = credential
            }
        }
        releaseUnusedLanes()
        countEarlierCredentials()
    }

    func presentPayload(_ payload: [UInt8]?) {
        guard presentedRefusal == nil else { return }
        present(PresentedCredential(payload: payload, headers: presented.headers))
    }

    /// Lets go of every held lane none of this client's open operations uses.
    func releaseUnusedLanes() {
        guard !heldLanes.isEmpty else { return }
        let used = switchboard.lanes(of: self)
        for lane in heldLanes where !used.contains(lane) {
            heldLanes.remove(lane)
            presentedForLane[lane] = nil
            host.releaseLane(lane)
        }
        countEarlierCredentials()
    }

    /// Lets go of everything it holds upstream (it leaves, or is refused at adoption).
    func releaseAll() {
        budget.credentialsChanged(by: -presented.byteCount)
        presented = PresentedCredential()
        for lane in heldLanes { host.releaseLane(lane) }
        heldLanes = []
        presentedForLane = [:]
        countEarlierCredentials()
    }

    /// How results reach this client: set by the endpoint's handlers before a subscribe (the
    /// WebSocket's for the session's life, the HTTP one per request: a stream's events, or
    /// lines for a JSON answer it assembles); the line protocol otherwise.
    var framing = NextFraming.line {
        didSet {
            framed = framing != .line
            framedHeader = framing.hasHeader
            framedSuffix = framing.suffix
            chunked = framing.isChunked
            if case .answer(let id) = framing { answerID = id } else { answerID = nil }
        }
    }
    /// A single HTTP answer's operation: its results reach the wire as values, which it
    /// assembles into its answer.
    private var answerID: String?
    /// `framing != .line`, read on the hot path. The batch then holds framed results only.
    private var framed = false
    /// The framing's parts the hot path reads, resolved once when it is set: whether a
    /// WebSocket frame header goes first, and the bytes after the payload.
    private var framedHeader = false
    private var framedSuffix: StaticString = LocalEncode.nextSuffix
    /// An HTTP stream's: each batch is sealed as one whole HTTP/1.1 chunk, written below the
    /// HTTP codec (one buffer per write, not the codec's three, and none of its handlers).
    private var chunked = false

    init(host: any SessionHost, switchboard: Switchboard, events: DaemonEvents, metrics: DaemonMetrics, channel: any Channel, origin: Origin = .lineSocket) {
        self.host = host
        self.switchboard = switchboard
        self.budget = switchboard.budget
        self.spare = switchboard.fanout.spare
        self.events = events
        self.metrics = metrics
        self.channel = channel
        self.origin = origin
    }

    // MARK: - Channel events

    /// An endpoint client's session is added once its kind is known, after the channel is active.
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { open(context.channel) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Its own place in the pipeline while there: what it writes starts there, wrapped here
    /// (``NIOAny``'s initializer, specialized for the type, needs no dynamic cast; `Channel`'s
    /// generic `write` made three per write).
    private var context: ChannelHandlerContext?

    func channelActive(context: ChannelHandlerContext) {
        open(context.channel)
        context.fireChannelActive()
    }

    private func open(_ channel: any Channel) {
        guard !opened else { return }
        opened = true
        credentials = origin == .endpointTCP ? nil : PeerCredentials.of(channel)
        process = credentials.flatMap { PeerCredentials.processName(pid: $0.pid) }
        host.sessionOpened(self)
    }

    func channelInactive(context: ChannelHandlerContext) {
        dropOperations()
        budget.outboundChanged(by: -buffered)
        buffered = 0
        releaseAll()  // also when it was refused as it opened: what it took since goes too
        host.sessionClosed(self)
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { budget.outboundChanged(by: refreshBuffered()) }
        if !context.channel.isWritable, !closing {
            queuedNow()
            events.emit(.slowConsumer, fields(), message: "client fell behind by more than client_buffer_bytes; disconnected")
            fail(code: LocalErrorCode.slowConsumer, "client did not read fast enough (client_buffer_bytes exceeded)", force: true)
            budget.scheduleTrim()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tooLong = error as? LineFrameDecoder.LineTooLong {
            events.emit(.clientProtocolError, fields(), message: "line too long")
            fail(code: LocalErrorCode.badRequest, "line longer than max_line_bytes (\(tooLong.limit))")
        } else if error is LineFrameDecoder.OverBudget {
            fail(code: LocalErrorCode.limitExceeded, "the daemon's memory budget (total_buffer_bytes) cannot hold this request now; try again later")
        } else {
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
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
        let latestRefusal = presentedRefusal
        for (index, group) in byCredential.sorted(by: { $0.key < $1.key }) {
            present(PresentedCredential(payload: earlier[index].payload.map { Array($0.utf8) }, headers: earlier[index].headers))
            for subscription in group { again(subscription) }
        }
        present(latest)
        if latest.isEmpty, let latestRefusal { presentedRefusal = latestRefusal }
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

    /// Tells the client `message`, after the results batched before it; flushes unless the
    /// caller batches. A line client gets it encoded into its batch; an endpoint client's wire
    /// gets the value, at once, to write in its own protocol.
    func send(_ message: SessionMessage, flush: Bool = true) {
        eventLoop.assertInEventLoop()
        guard !closing else { return }
        guard origin == .lineSocket else {
            let written = writeAll(then: message) + unreported
            unreported = 0
            budget.outboundChanged(by: written)
            return
        }
        batch.writeImmutableBuffer(LocalEncode.line(message))
        if flush { budget.outboundChanged(by: self.flush()) }
    }

    /// Hot path: prefix + the upstream payload bytes (forwarded, never re-encoded) + suffix,
    /// appended to this client's batch. One NIO write per client per loop turn is far cheaper
    /// than two per message (see scripts/bench.sh). False when nothing was written.
    /// `prefix` and `body` are the bytes of the subscriber's prefix and of `payload`.
    func writeNext(prefix: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, payload: borrowing ByteBuffer) -> Bool {
        guard body.count >= Self.sharedPayloadBytes, answerID == nil else { return writeNext(prefix: prefix, body: body) }
        guard !closing else { return false }
        if batch.capacity == 0 { reserveBatch(for: lastBatchBytes) }
        // Queued by reference after the batch so far, between its prefix and its suffix.
        if framed {
            let header = framedHeader
            let length = prefix.count + body.count + framedSuffix.utf8CodeUnitCount
            batch.writeWithUnsafeMutableBytes(minimumWritableBytes: NextFraming.maxHeaderBytes + prefix.count) { out in
                let written = header ? NextFraming.writeWebSocketHeader(length: length, to: out.baseAddress!) : 0
                if let source = prefix.baseAddress { (out.baseAddress! + written).copyMemory(from: source, byteCount: prefix.count) }
                return written + prefix.count
            }
        } else {
            batch.writeBytes(prefix)
        }
        if chunked { NextFraming.sealChunk(&batch) }
        queued.append((batch, false))
        queued.append((copy payload, true))
        startBatch()
        // Small: it may hold only the suffix (the next result's prefix joins it, if any).
        if chunked { batch.writeRepeatingByte(0, count: NextFraming.chunkHeaderRoom) }
        if framed { batch.writeStaticString(framedSuffix) } else { batch.writeStaticString(LocalEncode.nextSuffix) }
        writeIfChunkFull()
        return true
    }

    /// The same for a payload under ``sharedPayloadBytes``, copied: no buffer is passed (and
    /// retained) for it.
    @inline(__always)
    func writeNext(prefix: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) -> Bool {
        withUnsafePointer(to: body) { writeNexts(prefix: prefix, bodies: UnsafeBufferPointer(start: $0, count: 1)) }
    }

    /// Several results of one subscription (a run's share, every payload under
    /// ``sharedPayloadBytes``), copied into the batch in one pass per chunk: one capacity check
    /// per chunk instead of one per result, through NIO's inlinable raw-bytes accessors (its
    /// `writeBuffer` is not inlined and pays an exclusivity check per call: 15 % of fan-out
    /// time). Each result is written in the client's framing (``NextFraming``): header,
    /// prefix, payload, suffix. False when nothing was written.
    func writeNexts(prefix: UnsafeRawBufferPointer, bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Bool {
        guard !closing else { return false }
        if let answerID {
            for body in bodies { send(.next(id: answerID, payload: ByteBuffer(bytes: body), mark: nil)) }
            return true
        }
        let header = framed && framedHeader
        let tailString = framed ? framedSuffix : LocalEncode.nextSuffix
        tailString.withUTF8Buffer { tail in
            var next = bodies.startIndex
            // Room for this share up to a chunk at once: grown result by result, the batch was
            // copied by realloc on the way (3 % of fan-out time).
            let fixed = (header ? NextFraming.maxHeaderBytes : 0) + prefix.count + tail.count
            var left = 0
            for body in bodies { left &+= fixed &+ body.count }
            while next < bodies.endIndex {
                if batch.capacity == 0 {
                    reserveBatch(for: left)
                } else if batch.writableBytes < Swift.min(left, Self.batchChunkBytes + 2_048 - batch.readableBytes) {
                    batch.reserveCapacity(minimumWritableBytes: Swift.min(left, Self.batchChunkBytes + 2_048 - batch.readableBytes))
                }
                let before = batch.readableBytes
                next = Self.append(bodies, from: next, to: &batch, header: header, prefix: prefix, tail: tail)
                left -= batch.readableBytes - before
                writeIfChunkFull()
                if closing { break }  // its write failed
            }
        }
        return true
    }

    /// Copies results from `bodies[next...]` into `buffer`, each as header (a WebSocket frame's
    /// when `header`), prefix, payload and `tail`: as many as fit in what is left of a chunk
    /// (``batchChunkBytes``), and at least one. Returns the index of the first one left.
    @inline(__always)
    private static func append(
        _ bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>,
        from next: Int,
        to buffer: inout ByteBuffer,
        header: Bool,
        prefix: UnsafeRawBufferPointer,
        tail: UnsafeBufferPointer<UInt8>
    ) -> Int {
        let fixed = (header ? NextFraming.maxHeaderBytes : 0) + prefix.count + tail.count
        let (end, bytes) = ResultBytes.fitting(bodies, from: next, fixed: fixed, room: batchChunkBytes - buffer.readableBytes)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: bytes) { out in
            ResultBytes.frame(bodies, next..<end, header: header, prefix: prefix, tail: tail, to: out.baseAddress!)
        }
        return end
    }

    /// Whether the fan-out may hand this client a run's shared frames (``SharedFrames``): every
    /// client but a single HTTP answer, whose results reach its wire as values.
    var takesSharedFrames: Bool { answerID == nil }

    /// Hands `frames` to NIO after what this client has batched: a run's results framed once
    /// for every subscriber of this client's framing, with this client's prefix written in
    /// (``SharedFrames``). The same buffers, not copies, as every other such client of the run;
    /// they count in full for each client, as a shared large payload does. The caller flushes
    /// at once: NIO then writes them if the socket has room and lets go of them before the next
    /// subscriber's prefix is written into the same memory. False when this session is closing.
    func writeFrames(_ frames: [ByteBuffer]) -> Bool {
        guard !closing else { return false }
        var written = handOff()
        for frame in frames {
            write(frame, sealed: chunked)
            written += frame.readableBytes
        }
        buffered += written
        bytesSent &+= written
        unreported += written
        unflushed = true
        return true
    }

    @inline(__always)
    private func writeIfChunkFull() {
        if batch.readableBytes >= Self.batchChunkBytes {
            // Written now, while its bytes are still in the cache the copy above warmed. One
            // write per 32 KiB is still fewer than the reference's one per 64 lines.
            unreported += writeAll()
        }
    }

    /// Bytes written by `writeNext` early, not yet reported to the memory budget (`flush` does).
    private var unreported = 0

    /// A new batch is empty (an idle client holds no buffer); its first line reserves room for
    /// what the last flush carried, up to a chunk, so it does not grow by repeated reallocation
    /// (realloc and free were 9 % of fan-out time).
    private func startBatch() {
        batch = Self.emptyBatch
    }

    /// One empty buffer every idle batch shares: the first line then allocates once, at the
    /// hinted size (`ByteBuffer()` allocated, and the reserve allocated again and freed it).
    private static let emptyBatch = ByteBuffer()

    /// Room for about `bytes` (at least 512, at most a chunk): a large batch reuses the memory
    /// of one NIO has written (``BatchSpare``).
    private func reserveBatch(for bytes: Int) {
        let capacity = Swift.min(Swift.max(bytes, 512), Self.batchChunkBytes + 2_048)
        if capacity >= BatchSpare.minimumBytes, let reused = spare.take(capacity: capacity) {
            batch = reused
        } else {
            batch.reserveCapacity(capacity)
        }
        if chunked { batch.writeRepeatingByte(0, count: NextFraming.chunkHeaderRoom) }
    }

    /// Bytes of the last flush: the size hint for the next batch.
    private var lastBatchBytes = 0

    /// A batch this full is written at once and a new one begun, so no batch outgrows 64 KiB of
    /// capacity: glibc serves 128 KiB and more with a fresh mmap, whose pages fault in on every
    /// write (about 7 % of fan-out time with 100 subscribers before this cap).
    static let batchChunkBytes = 32 * 1_024

    /// Payloads at least this big are queued by reference instead of copied into the batch:
    /// a copy per client would multiply memory by the number of clients behind.
    static let sharedPayloadBytes = 1_024

    /// Writes and flushes everything batched since the last flush, and returns the bytes handed
    /// to NIO. They count as unwritten (`buffered`) until the next exact measurement: an upper
    /// bound that costs nothing on the hot path (the memory budget measures exactly when the
    /// estimate passes it, and a drain is measured when the channel turns writable again).
    @discardableResult
    func flush() -> Int {
        eventLoop.assertInEventLoop()
        guard !closing else { return 0 }
        defer { unreported = 0 }
        guard batch.readableBytes > 0 || !queued.isEmpty else {
            if unflushed { flushChannel() }
            unflushed = false
            return unreported
        }
        return writeAll() + unreported
    }

    /// Shared chunks were handed to NIO and not flushed yet.
    private var unflushed = false

    /// Hands everything batched to NIO, then `message` if given (an endpoint client's), and
    /// flushes: the bytes written (a message counts as none: its wire encodes it).
    private func writeAll(then message: SessionMessage? = nil) -> Int {
        let written = handOff()
        if let message { write(message) }
        flushChannel()
        unflushed = false
        lastBatchBytes = written
        buffered += written
        bytesSent &+= written
        return written
    }

    /// Hands the queued parts and the batch to NIO, unflushed, and starts a new batch: the
    /// bytes handed over.
    private func handOff() -> Int {
        var written = 0
        for part in queued where part.bytes.readableBytes > 0 {
            written += part.bytes.readableBytes
            write(part.bytes, sealed: chunked && !part.shared)
        }
        queued.removeAll(keepingCapacity: true)
        if batch.readableBytes > 0 {
            if chunked { NextFraming.sealChunk(&batch) }
            written += batch.readableBytes
            write(batch, sealed: chunked)
            spare.keep(batch)
        }
        startBatch()
        return written
    }

    /// A line-socket client gets bytes; an endpoint client's wire gets results already framed
    /// (`sealed`: as a whole HTTP chunk).
    private func write(_ bytes: ByteBuffer, sealed: Bool = false, promise: EventLoopPromise<Void>? = nil) {
        let data: NIOAny
        if origin == .lineSocket {
            data = NIOAny(bytes)
        } else {
            data = NIOAny(sealed ? SessionOutput.chunk(bytes) : SessionOutput.framed(bytes))
        }
        write(data, promise: promise)
    }

    /// A line-socket client gets `message` as its line; an endpoint client's wire gets the value.
    private func write(_ message: SessionMessage, promise: EventLoopPromise<Void>? = nil) {
        write(origin == .lineSocket ? NIOAny(LocalEncode.line(message)) : NIOAny(SessionOutput.message(message)), promise: promise)
    }

    private func write(_ data: NIOAny, promise: EventLoopPromise<Void>?) {
        if let context {
            context.write(data, promise: promise)
        } else {
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    /// Flushes from this session's place in the pipeline (the channel's tail adds a hop).
    private func flushChannel() {
        if let context { context.flush() } else { channel.flush() }
    }

    /// Measures how many bytes NIO holds unwritten for this client; returns the change.
    @discardableResult
    func refreshBuffered() -> Int {
        let now = queuedNow()
        defer { buffered = now }
        return now - buffered
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
    /// Results and bytes written to it, counted per batch (a subscriber's share of a run), never
    /// per result; and the same over the last seconds.
    private(set) var resultsSent = 0
    private(set) var bytesSent = 0
    private var bytesCounted = 0
    private(set) var resultWindow = RateWindow()
    private(set) var byteWindow = RateWindow()
    /// The most bytes seen queued for it (NIO's, measured when its buffer fills, when the
    /// memory budget is checked and at each `clients` question; the kernel's at the question).
    private(set) var peakQueued = 0

    /// `count` results were written to it in second `second` of the loop's clock.
    @inline(__always)
    func noteDelivered(_ count: Int, second: Int64) {
        resultsSent &+= count
        resultWindow.add(count, second: second)
        byteWindow.add(bytesSent &- bytesCounted, second: second)
        bytesCounted = bytesSent
    }

    /// The bytes NIO holds for it now, unwritten (measured, and kept as the peak if it is one).
    @discardableResult
    func queuedNow() -> Int {
        let now = closing ? 0 : ((try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0)
        if now > peakQueued { peakQueued = now }
        return now
    }

    /// Everything written for it that it has not read: NIO's queue and its socket's (the
    /// `clients` verb's `queuedBytes`; kept as the peak if it is one). The kernel counts its
    /// bookkeeping too (several times the bytes of small writes), so never more than was sent.
    func unreadNow() -> Int {
        let unread = min(queuedNow() + (closing ? 0 : KernelQueue.bytes(of: channel)), bytesSent)
        if unread > peakQueued { peakQueued = unread }
        return unread
    }

    /// Its kind as operators name it: the wire it speaks now.
    var kindName: String {
        guard origin != .lineSocket else { return "line" }
        switch framing {
        case .webSocket(.transportWS): return "graphql-transport-ws"
        case .webSocket(.legacyWS): return "graphql-ws"
        case .sse: return "sse"
        case .multipart: return "multipart"
        case .line, .answer: return "http"
        }
    }

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
        if !force { flush() }
        closing = true
        let channel = self.channel
        // Half-close after the error line and keep draining input for a moment: closing a Unix
        // socket with unread input makes the peer's read fail with ECONNRESET before it sees
        // the error line.
        let written = channel.eventLoop.makePromise(of: Void.self)
        write(.error(id: nil, .local(code: code, message: message)), promise: written)
        flushChannel()
        written.futureResult.whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
        // A WebSocket client cut for falling behind reads its close frame (1008, with the reason)
        // only after what is queued before it: it gets longer to drain it. Nothing new is queued.
        let grace: TimeAmount = force ? (origin == .lineSocket ? .seconds(1) : .seconds(10)) : .milliseconds(500)
        channel.eventLoop.scheduleTask(in: grace) { channel.close(promise: nil) }
    }

    /// The connection goes to the next process (a restart under systemd): everything batched is
    /// written, then nothing more. The future completes once NIO has handed all of it to the
    /// kernel, so no frame or line is left half-written.
    func handOver() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        flush()
        closing = true
        let written = eventLoop.makePromise(of: Void.self)
        write(ByteBuffer(), promise: written)
        flushChannel()
        return written.futureResult
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
        if origin != .lineSocket { f["GQLMUX_CLIENT_KIND"] = origin.rawValue }
        return f
    }
}
