import LocalProtocol
import Multiplexing
import NIOCore

/// Delivery, and nothing else: results of upstream operations to their subscribers, and what
/// the ``Switchboard`` tells one client (a state, an error, an end), written to each client's
/// batch and flushed when the upstream read that brought them ends (``flushNow()``), else once at
/// the end of the loop turn. Results of one operation that arrive together form a run, written
/// subscriber by subscriber (`Fanout+Delivery.swift`). It decides nothing: whom
/// a result goes to is the core's answer, given with the result.
///
/// `@unchecked Sendable` — safe because it is used only on the daemon's event loop, by the
/// switchboard (whose entry points assert the loop) and by its own flush, which it schedules on
/// that loop; `tell`, the marked and held deliveries and the flush assert it too
/// (`eventLoop.assertInEventLoop()`, checked in debug builds and tests). The hot path's
/// `append` and `markDirty` are reached only through those.
package final class Fanout: @unchecked Sendable {
    package typealias Core = Multiplexer<ObjectIdentifier, Delivery>

    package let eventLoop: any EventLoop
    /// What the clients' unwritten bytes may take, told of what each flush hands to NIO.
    package let budget: any OutboundBudget
    /// Shared with the switchboard: a client cut by its own write during a delivery is told
    /// to the core after the delivery.
    private let turn: OneAtATime
    /// Results of one operation that arrived this turn and are not written yet, with the
    /// subscribers they go to.
    package var run = ResultRun()
    /// A small run's payloads side by side, reused run after run (its capacity kept): the one
    /// buffer whose bytes the run's writers read (``writeSmallRun``).
    package var runScratch = ByteBuffer()
    /// The buffers of a small run's shared frames (``SharedFrames``), kept for the next run's:
    /// one NIO has written is reused without an allocation.
    package var frameStock: [ByteBuffer] = []
    /// The arrays of a small run's shared frames, kept for the next run's (``SharedFrames/Spare``).
    package var frameSpares: [SharedFrames.Spare] = []
    /// The arrays a small run is written with, kept for the next run's.
    package var runArrays = RunArrays()
    /// Told each run's operation and last result once the run is written (kept for replays).
    package var runWritten: (Core.OperationID, _ last: ByteBuffer, _ count: Int) -> Void = { _, _, _ in }
    /// When the run being written is written (the loop's clock, read once per run), and its
    /// whole second: what each subscriber's and the operation's counts go to.
    package var runAt: UInt64 = 0
    package var runSecond: Int64 = 0

    /// The loop clock's whole second now.
    @inline(__always)
    package static func second() -> Int64 { Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000_000) }
    /// Writers written to since the last flush, each once (see `ResultWriter.awaitingFlush`).
    private var dirty: [ResultWriter] = []
    private var flushScheduled = false
    /// Results written to clients.
    package var messagesOut = 0
    /// A written batch's memory, which the next client's large batch reuses.
    package let spare = BatchSpare()

    package init(eventLoop: any EventLoop, budget: any OutboundBudget, turn: OneAtATime) {
        self.eventLoop = eventLoop
        self.budget = budget
        self.turn = turn
    }

    /// Runs `body` as one step of the event being handled (``OneAtATime``).
    package func serially(_ body: () -> Void) { turn.run(body) }

    // MARK: - One client

    /// Tells `subscriber`'s client `message` after the results batched before it: flushed at
    /// the end of the turn, or at once when `flush`. False when its client is closed (told
    /// nothing).
    @discardableResult
    package func tell(_ subscriber: Core.Subscriber, _ message: SessionMessage, flush: Bool = false) -> Bool {
        eventLoop.assertInEventLoop()
        let writer = subscriber.tag.sink.writer
        guard !writer.closed else { return false }
        budget.outboundChanged(by: writer.send(message, flush: flush))
        if !flush { markDirty(writer) }
        return true
    }

    /// A result gqlmuxd itself gives one subscriber (a replay, a snapshot), as a value its wire
    /// marks in its own words: `"<mark>": true` on the line protocol's `next`, the result's
    /// `extensions.gqlmux` for the endpoint's clients.
    package func deliverMarked(_ payload: ByteBuffer, _ mark: ResultMark, to subscriber: Core.Subscriber) {
        eventLoop.assertInEventLoop()
        let writer = subscriber.tag.sink.writer
        budget.outboundChanged(by: writer.send(.next(id: subscriber.localID, payload: payload, mark: mark), flush: false))
        writer.noteDelivered(1, second: Self.second())
        messagesOut += 1
        markDirty(writer)
    }

    /// A result held for a subscriber until its snapshot was answered.
    package func deliverHeld(_ payload: ByteBuffer, to subscriber: Core.Subscriber) {
        eventLoop.assertInEventLoop()
        if payload.withUnsafeReadableBytes({ write($0, payload, to: subscriber.tag) }) { messagesOut += 1 }
    }

    // MARK: - Flushing

    /// Flushes every writer written to since the last flush: when the upstream read ends
    /// (``flushNow()``), else at the end of the loop turn. A flag test per delivery on the hot
    /// path, not a hash insert.
    package func markDirty(_ writer: ResultWriter) {
        guard !writer.awaitingFlush else { return }
        writer.awaitingFlush = true
        dirty.append(writer)
        scheduleFlush()
    }

    /// The end of this loop turn flushes (and writes the run).
    package func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        eventLoop.execute { self.flushDirty() }
    }

    /// Writes the run and flushes every session written since the last flush now, instead of
    /// at the end of the loop turn (whose scheduled flush then writes only what came after, if
    /// anything did). Not from inside a flush: what a flush's own writes caused waits for the
    /// next.
    package func flushNow() {
        eventLoop.assertInEventLoop()
        guard flushScheduled, !flushing else { return }
        flushDirty()
    }

    /// A flush is running (``flushNow()`` from inside it does nothing).
    private var flushing = false

    private func flushDirty() {
        eventLoop.assertInEventLoop()
        guard !flushing else { return }
        flushing = true
        defer { flushing = false }
        flushScheduled = false
        // Each subscriber's share of the run is written out at once, while its bytes are warm.
        var change = writeRun(flushing: true)
        let writers = dirty
        dirty.removeAll(keepingCapacity: true)
        for writer in writers {
            writer.awaitingFlush = false
            change += writer.flush()
        }
        budget.outboundChanged(by: change)
    }
}
