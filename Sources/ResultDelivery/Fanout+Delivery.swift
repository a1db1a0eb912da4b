import LocalEndpoint
import Multiplexing
import NIOCore

/// The hot path's unsafe code, all of it, lives in this module (ResultDelivery), the one built
/// without exclusivity checks in release. Why: the hot path reads each subscriber's writer and
/// prefix without reference counting (retain/release pairs were 13 % of fan-out time with 100
/// subscribers, 18 % with 500) and copies results with raw stores. What keeps it safe is stated
/// here, once; each invariant has its test in `Tests/ResultDeliveryTests/InvariantTests.swift`.
///
/// 1. **Owned handles.** A ``Fanout/Delivery`` owns a ``Fanout/SubscriberSink``, and the sink owns
///    what the delivery's two plain values point at: `handle` is its `writer`, held strongly for
///    the sink's whole life, and `prefixBytes` is storage the sink allocated itself in `init`,
///    wrote only there and frees only in `deinit`. So both are valid for as long as the
///    `Delivery` value that carries them is reachable, and nothing else can move or free them.
/// 2. **Scoped pointers.** Every other pointer is scoped: a payload's bytes are read inside its
///    own `withUnsafeReadableBytes`, and a small run's inside the one of ``Fanout/runScratch``,
///    where its payloads lie side by side. None is kept past the closure that made it: the
///    array of a run's body pointers is emptied before it is kept for the next run.
/// 3. **Bounded writes.** ``ResultBytes/frame(_:_:header:prefix:tail:to:place:)`` writes at most
///    the bytes ``ResultBytes/fitting(_:from:fixed:room:)`` counted for the same results (a
///    header's full room counted, whatever its length), and every caller reserves at least that
///    many before it writes.
/// 4. **Handed bytes never change.** A frame handed to a subscriber (``SharedFrames``) is never
///    written again while anything else holds it: the next subscriber's prefix goes into a copy.
extension Fanout {
    /// One subscriber's writer and its encoded `next` prefix, owned.
    package final class SubscriberSink {
        package let writer: ResultWriter
        /// `{"type":"next","id":LOCAL_ID,"payload":`, in storage this sink allocated.
        fileprivate let prefix: UnsafeMutableRawBufferPointer

        package init(writer: ResultWriter, prefix encoded: ByteBuffer) {
            self.writer = writer
            prefix = .allocate(byteCount: encoded.readableBytes, alignment: 1)
            encoded.withUnsafeReadableBytes { prefix.copyMemory(from: $0) }
        }

        deinit { prefix.deallocate() }
    }

    /// What the hot path needs per subscriber, as plain values (see the invariant above).
    package struct Delivery {
        package let sink: SubscriberSink
        /// `sink.writer`, unretained.
        package let handle: Unmanaged<ResultWriter>
        /// `sink.prefix`, read only.
        package let prefixBytes: UnsafeRawBufferPointer

        /// One allocation for the prefix (a `ByteBuffer` takes two, 60 bytes more per idle
        /// subscription) and one for the sink.
        package init(writer: ResultWriter, prefix: ByteBuffer) {
            sink = SubscriberSink(writer: writer, prefix: prefix)
            handle = Unmanaged.passUnretained(writer)
            prefixBytes = UnsafeRawBufferPointer(sink.prefix)
        }
    }

    /// Results of one operation, in the order they arrived this loop turn, not yet written.
    /// Written subscriber by subscriber: each client is handed all of the run and flushed before
    /// the next, from frames shared while they are in the cache (``SharedFrames``). Written
    /// result by result instead, 100 clients' batches were megabytes between two writes of one,
    /// and the kernel read them back from memory.
    package struct ResultRun {
        package var id: Core.OperationID?
        /// The operation's subscribers, as the core named them when the run began (the core
        /// changes only after the run is written).
        package var subscribers: [Core.Subscriber] = []
        package var payloads: [ByteBuffer] = []
        var bytes = 0
        /// The largest payload's bytes.
        var largest = 0
        var writing = false
    }

    /// A run holds at most this many payload bytes before it is written (a turn reads less).
    package static let runBytes = 256 * 1_024

    /// The hot path: `payload`, a result of operation `id`, joins this turn's run. A result of
    /// another operation first writes the run, then begins one for `subscribers`, read only then.
    package func append(_ payload: ByteBuffer, of id: Core.OperationID, subscribers: @autoclosure () -> [Core.Subscriber]) {
        if run.id != id {
            writeRun()
            run.id = id
            run.subscribers = subscribers()
        }
        run.payloads.append(payload)
        run.bytes += payload.readableBytes
        run.largest = max(run.largest, payload.readableBytes)
        if run.bytes >= Self.runBytes { writeRun() } else { scheduleFlush() }
    }

    /// Writes the run to every subscriber of its operation: all of its results to the first,
    /// then all to the next, then tells ``runWritten`` its last result. `flushing` (the end of
    /// the turn): each subscriber is flushed right after its share. Returns the change in bytes
    /// handed to NIO by those flushes.
    @discardableResult
    package func writeRun(flushing: Bool = false) -> Int {
        guard !run.writing, let id = run.id, !run.payloads.isEmpty else { return 0 }
        var change = 0
        // One reading of the clock per run: the second each subscriber's and the operation's
        // counts go to (the operator's view).
        runAt = NIODeadline.now().uptimeNanoseconds
        runSecond = Int64(runAt / 1_000_000_000)
        serially {
            run.writing = true
            var payloads: [ByteBuffer] = []
            swap(&payloads, &run.payloads)
            let subscribers = run.subscribers
            // Shared frames are flushed to each subscriber at once: worth it at the end of the
            // turn, which flushes anyway, or for a run of a chunk or more. A short run cut off
            // mid-turn by another operation's result (subscriptions whose results interleave)
            // is copied into each client's batch instead, and flushed with the turn: a write
            // per client per result cost 7 times the deliveries.
            let sharing = flushing || run.bytes >= ResultWriter.batchChunkBytes
            let (delivered, flushed) =
                run.largest < ResultWriter.sharedPayloadBytes
                ? writeSmallRun(payloads, to: subscribers, flushing: flushing, sharing: sharing)
                : writeLargeRun(payloads, to: subscribers, flushing: flushing)
            change = flushed
            messagesOut += delivered
            let last = payloads[payloads.count - 1]
            let count = payloads.count
            payloads.removeAll(keepingCapacity: true)
            run = ResultRun(payloads: payloads)
            runWritten(id, last, count)
        }
        return change
    }

    /// A run whose payloads are all under ``ResultWriter/sharedPayloadBytes``: copied once
    /// into ``runScratch``, side by side; then, when `sharing`, framed once for each framing and
    /// prefix length among its subscribers (``SharedFrames``, at most ``frameGroups`` of them),
    /// each subscriber's prefix written into the frames before they are handed to it and
    /// flushed. A subscriber of another framing past that many, and every one that names its
    /// operation in its results when not `sharing`, is copied its share into its own batch;
    /// SSE and multipart subscribers share their frames either way (nothing is written into
    /// them). Returns the results delivered and the bytes the flushes handed to NIO.
    private func writeSmallRun(_ payloads: [ByteBuffer], to subscribers: [Core.Subscriber], flushing: Bool, sharing: Bool)
        -> (delivered: Int, flushed: Int)
    {
        runScratch.clear()
        // The run's arrays, kept with their capacity from run to run (``runArrays``).
        var (ends, bodies, groups) = (runArrays.ends, runArrays.bodies, runArrays.groups)
        runArrays = RunArrays()
        defer {
            // `bodies` is emptied: its pointers were valid inside `runScratch`'s closure only.
            ends.removeAll(keepingCapacity: ends.capacity <= SharedFrames.keptPlaces)
            bodies.removeAll(keepingCapacity: bodies.capacity <= SharedFrames.keptPlaces)
            groups.removeAll(keepingCapacity: true)
            runArrays = RunArrays(ends: ends, bodies: bodies, groups: groups)
        }
        ends.reserveCapacity(payloads.count)
        for payload in payloads {
            runScratch.writeImmutableBuffer(payload)
            ends.append(runScratch.readableBytes)
        }
        var delivered = 0
        var flushed = 0
        runScratch.withUnsafeReadableBytes { all in
            // Each payload's bytes, as slices of `all`: valid inside this closure only (emptied
            // before `bodies` is kept for the next run).
            var start = 0
            for end in ends {
                bodies.append(UnsafeRawBufferPointer(rebasing: all[start..<end]))
                start = end
            }
            bodies.withUnsafeBufferPointer { bodies in
                subscribers.withUnsafeBufferPointer { subscribers in
                    for index in subscribers.indices {
                        // The two plain fields read in place: copying the `Delivery` out would
                        // retain and release its sink for every delivery (16 % of fan-out time).
                        let handle = subscribers[index].tag.handle
                        let head = subscribers[index].tag.prefixBytes
                        var framed = false
                        let written = handle._withUnsafeGuaranteedRef { writer in
                            let framing = writer.framing
                            // An HTTP stream's prefix names no operation: its frames are shared
                            // with nothing written, so they need no flush of their own.
                            guard writer.takesSharedFrames, sharing || framing.isChunked else {
                                return writer.writeNexts(prefix: head, bodies: bodies)
                            }
                            let group: Int
                            if let found = groups.firstIndex(where: { $0.fits(framing, prefixLength: head.count) }) {
                                group = found
                            } else if groups.count < Self.frameGroups {
                                groups.append(
                                    SharedFrames(framing: framing, prefix: head, bodies: bodies, stock: &frameStock, spares: &frameSpares)
                                )
                                group = groups.count - 1
                            } else {
                                return writer.writeNexts(prefix: head, bodies: bodies)
                            }
                            groups[group].hold(head)
                            framed = sharing
                            return writer.writeFrames(groups[group].frames)
                        }
                        guard written else { continue }
                        delivered += bodies.count
                        // Shared frames are flushed at once, so that NIO lets go of them before
                        // the next subscriber's prefix is written in.
                        flushed += finishDelivery(to: handle, results: bodies.count, flushing: flushing || framed)
                    }
                }
            }
        }
        for index in groups.indices { groups[index].recycle(into: &frameStock, limit: Self.frameStockLimit, spares: &frameSpares) }
        return (delivered, flushed)
    }

    /// The arrays a small run is written with (its payloads' ends, their bytes while it is
    /// written, its groups of shared frames), empty between runs, their capacity kept.
    package struct RunArrays {
        package var ends: [Int] = []
        package var bodies: [UnsafeRawBufferPointer] = []
        package var groups: [SharedFrames] = []
    }

    /// A small run is framed once for at most this many framings and prefix lengths.
    package static let frameGroups = 4

    /// At most this many frames' buffers are kept for the next run's (``frameStock``).
    package static let frameStockLimit = 16

    /// A run with a payload of ``ResultWriter/sharedPayloadBytes`` or more: each subscriber
    /// is handed the large payloads' buffers themselves (no copy) and the small ones copied,
    /// result after result. Returns the results delivered and the bytes the flushes handed to NIO.
    private func writeLargeRun(_ payloads: [ByteBuffer], to subscribers: [Core.Subscriber], flushing: Bool) -> (delivered: Int, flushed: Int) {
        var delivered = 0
        var flushed = 0
        subscribers.withUnsafeBufferPointer { subscribers in
            for index in subscribers.indices {
                let handle = subscribers[index].tag.handle
                let head = subscribers[index].tag.prefixBytes
                var wrote = 0
                for payload in payloads {
                    let written = payload.withUnsafeReadableBytes { body in
                        handle._withUnsafeGuaranteedRef { writer in
                            body.count < ResultWriter.sharedPayloadBytes
                                ? writer.writeNext(prefix: head, body: body)
                                : writer.writeNext(prefix: head, body: body, payload: payload)
                        }
                    }
                    guard written else { break }
                    wrote += 1
                }
                guard wrote > 0 else { continue }
                delivered += wrote
                flushed += finishDelivery(to: handle, results: wrote, flushing: flushing)
            }
        }
        return (delivered, flushed)
    }

    /// A subscriber was written to: marked for the end of the turn's flush, or flushed now when
    /// `flushing`. Returns the bytes that flush handed to NIO.
    @inline(__always)
    private func finishDelivery(to handle: Unmanaged<ResultWriter>, results: Int, flushing: Bool) -> Int {
        handle._withUnsafeGuaranteedRef { writer in
            writer.noteDelivered(results, second: runSecond)
            markDirty(writer)
            return flushing ? writer.flush() : 0
        }
    }

    /// Writes one result at once to the subscribers of an operation that `including` accepts
    /// (while some wait for a snapshot).
    package func deliver(_ payload: ByteBuffer, to subscribers: [Core.Subscriber], including: (Core.Subscriber) -> Bool) {
        var delivered = 0
        payload.withUnsafeReadableBytes { body in
            subscribers.withUnsafeBufferPointer { subscribers in
                for index in subscribers.indices where including(subscribers[index]) {
                    // The two plain fields read in place: copying the `Delivery` out would retain
                    // and release its sink for every delivery (16 % of fan-out time).
                    let handle = subscribers[index].tag.handle
                    let head = subscribers[index].tag.prefixBytes
                    if write(body, payload, to: handle, prefix: head) { delivered += 1 }
                }
            }
        }
        messagesOut += delivered
    }

    /// One result to one subscriber (its prefix, the payload's bytes, its suffix), marked for
    /// the next flush; false when its client is closed.
    @inline(__always)
    package func write(_ body: UnsafeRawBufferPointer, _ payload: borrowing ByteBuffer, to delivery: Delivery) -> Bool {
        write(body, payload, to: delivery.handle, prefix: delivery.prefixBytes)
    }

    /// The same, from a delivery's two plain values.
    @inline(__always)
    package func write(_ body: UnsafeRawBufferPointer, _ payload: borrowing ByteBuffer, to handle: Unmanaged<ResultWriter>, prefix head: UnsafeRawBufferPointer)
        -> Bool
    {
        handle._withUnsafeGuaranteedRef { writer in
            guard writer.writeNext(prefix: head, body: body, payload: payload) else { return false }
            writer.noteDelivered(1, second: Self.second())
            markDirty(writer)
            return true
        }
    }
}
