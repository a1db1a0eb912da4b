import GQLMuxVocabulary
import LocalEndpoint
import LocalProtocol
import NIOCore

/// One client's way out: its results framed in its wire's framing (``NextFraming``), batched
/// into one write per loop turn, HTTP chunks sealed, shared frames handed on, and the messages
/// its session tells it, in order after the results before them. The fan-out writes to it
/// straight (``Fanout/Delivery``), the session for everything else; neither frames anything.
///
/// What reaches the wire in front of it is what that wire takes (``Output``): the line
/// protocol takes bytes, messages encoded into the batch as lines; the endpoint's WebSocket and
/// HTTP wires take their own values (``WebSocketOutput``, ``HTTPOutput``), messages as values
/// they write in their own words.
///
/// Not `Sendable`: used on its channel's loop only (the session's handler methods, and the
/// fan-out's deliveries, whose entry asserts that loop).
package final class ResultWriter {
    /// How the wire in front of this writer takes what it writes.
    package enum Output: Sendable {
        /// Bytes, as they go to the socket: messages encoded as lines into the batch.
        case lines
        /// ``WebSocketOutput``: results as whole frames, messages as values.
        case webSocket
        /// ``HTTPOutput``: a stream's results as body parts or sealed chunks, messages as values.
        case http
    }

    private let output: Output
    private let channel: any Channel
    private let budget: any OutboundBudget
    /// The memory of a written batch, reused for the next large one (``BatchSpare``).
    private let spare: BatchSpare

    /// Where its writes start: the session's own place in the pipeline while it is there.
    package var context: ChannelHandlerContext?

    /// Once set (error, slow consumer, shutdown, handover) nothing more is batched.
    package var closed = false

    /// Set while the fan-out holds it in its list to flush at the end of the loop turn.
    package var awaitingFlush = false

    package init(output: Output, channel: any Channel, budget: any OutboundBudget, spare: BatchSpare) {
        self.output = output
        self.channel = channel
        self.budget = budget
        self.spare = spare
    }

    // MARK: - Framing

    /// How results reach this client: set by the endpoint's handlers before a subscribe (the
    /// WebSocket's for the session's life, the HTTP one per request: a stream's events, or
    /// values for a JSON answer it assembles); the line protocol otherwise.
    package var framing = NextFraming.line {
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

    /// The wire as operators name it (the `clients` verb's `kind`): as this writer frames for
    /// it now.
    package var kindName: String {
        guard output != .lines else { return "line" }
        switch framing {
        case .webSocket(.transportWS): return "graphql-transport-ws"
        case .webSocket(.legacyWS): return "graphql-ws"
        case .sse: return "sse"
        case .multipart: return "multipart"
        case .line, .answer: return "http"
        }
    }

    /// Whether the fan-out may hand this client a run's shared frames (``SharedFrames``): every
    /// client but a single HTTP answer, whose results reach its wire as values.
    package var takesSharedFrames: Bool { answerID == nil }

    // MARK: - The batch

    /// Results written since the last flush, sent as one write.
    private var batch = ResultWriter.emptyBatch
    /// Buffers queued before `batch` in this turn: earlier batch parts and large upstream
    /// payloads passed by reference, so N clients behind on one message share its bytes. A
    /// `shared` part of an HTTP stream is not a sealed chunk: the HTTP codec chunks it.
    private var queued: [(bytes: ByteBuffer, shared: Bool)] = []
    /// Bytes NIO holds for this client, unwritten, as of the last flush or refresh.
    package private(set) var buffered = 0
    /// Bytes written by `writeNext` early, not yet reported to the memory budget (`flush` does).
    private var unreported = 0
    /// Shared chunks were handed to NIO and not flushed yet.
    private var unflushed = false
    /// Bytes of the last flush: the size hint for the next batch.
    private var lastBatchBytes = 0

    /// A batch this full is written at once and a new one begun, so no batch outgrows 64 KiB of
    /// capacity: glibc serves 128 KiB and more with a fresh mmap, whose pages fault in on every
    /// write (about 7 % of fan-out time with 100 subscribers before this cap).
    package static let batchChunkBytes = 32 * 1_024

    /// Payloads at least this big are queued by reference instead of copied into the batch:
    /// a copy per client would multiply memory by the number of clients behind.
    package static let sharedPayloadBytes = 1_024

    /// One empty buffer every idle batch shares: the first line then allocates once, at the
    /// hinted size (`ByteBuffer()` allocated, and the reserve allocated again and freed it).
    private static let emptyBatch = ByteBuffer()

    // MARK: - Results (the hot path)

    /// Hot path: prefix + the upstream payload bytes (forwarded, never re-encoded) + suffix,
    /// appended to this client's batch. One NIO write per client per loop turn is far cheaper
    /// than two per message (see scripts/bench.sh). False when nothing was written.
    /// `prefix` and `body` are the bytes of the subscriber's prefix and of `payload`.
    package func writeNext(prefix: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, payload: borrowing ByteBuffer) -> Bool {
        guard body.count >= Self.sharedPayloadBytes, answerID == nil else { return writeNext(prefix: prefix, body: body) }
        guard !closed else { return false }
        if batch.capacity == 0 { reserveBatch(for: lastBatchBytes) }
        // Queued by reference after the batch so far, between its prefix and its suffix.
        if framed {
            let header = framedHeader
            let length = prefix.count + body.count + framedSuffix.utf8CodeUnitCount
            batch.writeWithUnsafeMutableBytes(minimumWritableBytes: NextFraming.maxHeaderBytes + prefix.count) { out in
                let written = header ? FrameHeader.write(length: length, to: out.baseAddress!) : 0
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
    package func writeNext(prefix: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) -> Bool {
        withUnsafePointer(to: body) { writeNexts(prefix: prefix, bodies: UnsafeBufferPointer(start: $0, count: 1)) }
    }

    /// Several results of one subscription (a run's share, every payload under
    /// ``sharedPayloadBytes``), copied into the batch in one pass per chunk: one capacity check
    /// per chunk instead of one per result, through NIO's inlinable raw-bytes accessors (its
    /// `writeBuffer` is not inlined and pays an exclusivity check per call: 15 % of fan-out
    /// time). Each result is written in the client's framing (``NextFraming``): header,
    /// prefix, payload, suffix. False when nothing was written.
    package func writeNexts(prefix: UnsafeRawBufferPointer, bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Bool {
        guard !closed else { return false }
        if let answerID {
            for body in bodies { budget.outboundChanged(by: send(.next(id: answerID, payload: ByteBuffer(bytes: body), mark: nil))) }
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
                if closed { break }  // its write failed
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

    /// Hands `frames` to NIO after what this client has batched: a run's results framed once
    /// for every subscriber of this client's framing, with this client's prefix written in
    /// (``SharedFrames``). The same buffers, not copies, as every other such client of the run;
    /// they count in full for each client, as a shared large payload does. The caller flushes
    /// at once: NIO then writes them if the socket has room and lets go of them before the next
    /// subscriber's prefix is written into the same memory. False when this client is closed.
    package func writeFrames(_ frames: [ByteBuffer]) -> Bool {
        guard !closed else { return false }
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

    /// A new batch is empty (an idle client holds no buffer); its first line reserves room for
    /// what the last flush carried, up to a chunk, so it does not grow by repeated reallocation
    /// (realloc and free were 9 % of fan-out time).
    private func startBatch() {
        batch = Self.emptyBatch
    }

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

    // MARK: - Messages

    /// `message`, after the results batched before it. A line client's is encoded into its
    /// batch and flushed when `flush`; an endpoint client's wire gets the value at once, to
    /// write in its own protocol. Returns the bytes handed to NIO, for the memory budget.
    package func send(_ message: SessionMessage, flush: Bool = true) -> Int {
        guard !closed else { return 0 }
        switch output {
        case .lines:
            batch.writeImmutableBuffer(LocalEncode.line(message))
            return flush ? self.flush() : 0
        case .webSocket, .http:
            defer { unreported = 0 }
            return writeAll(then: message) + unreported
        }
    }

    /// The last thing written: `message` after everything batched, flushed, whether or not it
    /// is closed; `promise` completes once NIO has handed it to the kernel.
    package func sendLast(_ message: SessionMessage, promise: EventLoopPromise<Void>?) {
        write(message, promise: promise)
        flushChannel()
    }

    // MARK: - Flushing

    /// Writes and flushes everything batched since the last flush, and returns the bytes handed
    /// to NIO. They count as unwritten (`buffered`) until the next exact measurement: an upper
    /// bound that costs nothing on the hot path (the memory budget measures exactly when the
    /// estimate passes it, and a drain is measured when the channel turns writable again).
    @discardableResult
    package func flush() -> Int {
        guard !closed else { return 0 }
        defer { unreported = 0 }
        guard batch.readableBytes > 0 || !queued.isEmpty else {
            if unflushed { flushChannel() }
            unflushed = false
            return unreported
        }
        return writeAll() + unreported
    }

    /// Everything batched is written, then nothing more: the future completes once NIO has
    /// handed all of it to the kernel, so no frame or line is left half-written.
    package func writeOut() -> EventLoopFuture<Void> {
        flush()
        closed = true
        let written = channel.eventLoop.makePromise(of: Void.self)
        write(ByteBuffer(), promise: written)
        flushChannel()
        return written.futureResult
    }

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

    /// Bytes as the wire takes them: as they are, or results already framed (`sealed`: as a
    /// whole HTTP chunk).
    private func write(_ bytes: ByteBuffer, sealed: Bool = false, promise: EventLoopPromise<Void>? = nil) {
        switch output {
        case .lines: write(NIOAny(bytes), promise: promise)
        case .webSocket: write(NIOAny(WebSocketOutput.frames(bytes)), promise: promise)  // never sealed: not chunked
        case .http: write(NIOAny(sealed ? HTTPOutput.chunk(bytes) : HTTPOutput.body(bytes)), promise: promise)
        }
    }

    /// `message` as the wire takes it: its line, or the value.
    private func write(_ message: SessionMessage, promise: EventLoopPromise<Void>? = nil) {
        switch output {
        case .lines: write(NIOAny(LocalEncode.line(message)), promise: promise)
        case .webSocket: write(NIOAny(WebSocketOutput.message(message)), promise: promise)
        case .http: write(NIOAny(HTTPOutput.message(message)), promise: promise)
        }
    }

    /// From the session's place in the pipeline (``NIOAny``'s initializer, specialized for the
    /// type, needs no dynamic cast; `Channel`'s generic `write` made three per write).
    private func write(_ data: NIOAny, promise: EventLoopPromise<Void>?) {
        if let context {
            context.write(data, promise: promise)
        } else {
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    /// Flushes from the session's place in the pipeline (the channel's tail adds a hop).
    private func flushChannel() {
        if let context { context.flush() } else { channel.flush() }
    }

    // MARK: - What it holds and has sent (the memory budget, the operator's view)

    /// Results and bytes written, counted per batch (a subscriber's share of a run), never per
    /// result; and the same over the last seconds.
    package private(set) var resultsSent = 0
    package private(set) var bytesSent = 0
    private var bytesCounted = 0
    package private(set) var resultWindow = RateWindow()
    package private(set) var byteWindow = RateWindow()
    /// The most bytes seen queued (NIO's, measured when its buffer fills, when the memory
    /// budget is checked and at each `clients` question; the kernel's at the question).
    package private(set) var peakQueued = 0

    /// `count` results were written in second `second` of the loop's clock.
    @inline(__always)
    package func noteDelivered(_ count: Int, second: Int64) {
        resultsSent &+= count
        resultWindow.add(count, second: second)
        byteWindow.add(bytesSent &- bytesCounted, second: second)
        bytesCounted = bytesSent
    }

    /// Measures how many bytes NIO holds unwritten; returns the change.
    @discardableResult
    package func refreshBuffered() -> Int {
        let now = queuedNow()
        defer { buffered = now }
        return now - buffered
    }

    /// The client is gone: what it held unwritten no longer counts. Returns the change.
    package func releaseBuffered() -> Int {
        defer { buffered = 0 }
        return -buffered
    }

    /// The bytes NIO holds unwritten now (measured, and kept as the peak if it is one).
    @discardableResult
    package func queuedNow() -> Int {
        let now = closed ? 0 : ((try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0)
        if now > peakQueued { peakQueued = now }
        return now
    }

    /// `bytes` were seen queued for the client (its socket's included): kept as the peak if
    /// it is one.
    package func notePeak(_ bytes: Int) {
        if bytes > peakQueued { peakQueued = bytes }
    }
}

@available(*, unavailable)
extension ResultWriter: Sendable {}
