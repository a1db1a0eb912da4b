import CMallocTuning
import GQLMuxVocabulary
import LocalProtocol
import NIOCore
import ResultDelivery

#if canImport(Glibc)
import Glibc
#endif

/// The memory budget: `[limits] total_buffer_bytes` bounds the bytes waiting to be written to
/// all local clients together (each is also bounded by `client_buffer_bytes`), with the bytes of
/// requests not yet whole and the latest results kept for replays. Over the budget, the kept
/// results go first, then the client furthest behind is cut with `SLOW_CONSUMER`, then the
/// next, until the total is back under it. After cuts the allocator is asked to give freed
/// memory back to the system. Sessions report what they hand to NIO; the switchboard asks it how
/// much room is left to keep results in.
///
/// Not `Sendable`: the daemon, its sessions, switchboard and fan-out use it on the daemon's loop only.
final class MemoryBudget: OutboundBudget {
    private let eventLoop: any EventLoop
    private let events: DaemonEvents
    /// `[limits] total_buffer_bytes` (a reload may change it).
    var limit: Int
    /// Bytes handed to NIO for all clients and not yet written (an upper bound between
    /// measurements: see ``ClientSession/flush()``).
    private(set) var outbound = 0
    /// Bytes of unfinished requests of all clients together (see ``inboundChanged(by:holding:for:)``).
    private(set) var inbound = 0
    /// Bytes of the credentials clients present for `identity = "client"` upstreams.
    private(set) var credentials = 0
    /// The connections holding unfinished requests now.
    private var inboundHolders: [ObjectIdentifier: InboundReservation] = [:]
    private var inboundLog = LogLimiter<Int>()
    private var trimScheduled = false

    /// The sessions to measure and cut: the daemon's table of them.
    private let sessions: LiveSessions
    /// Bytes of latest results kept for replays, and dropping them all: the switchboard's.
    var retained: () -> Int = { 0 }
    var forgetRetained: () -> Void = {}

    init(limit: Int, sessions: LiveSessions, eventLoop: any EventLoop, events: DaemonEvents) {
        self.limit = limit
        self.sessions = sessions
        self.eventLoop = eventLoop
        self.events = events
    }

    /// What is left for results kept for replays.
    var room: Int { max(0, limit - outbound - inbound - credentials) }

    /// The credentials kept for clients grow by `delta` (or shrink): a growth that does not fit
    /// beside what is buffered is refused (kept results give way first), and the caller keeps
    /// nothing of that credential. Credentials are never cut: they are bounded each by
    /// `max_credential_bytes`, and only refused.
    /// - Returns: whether it fits (a shrink always does).
    @discardableResult
    func credentialsChanged(by delta: Int, whatever: Bool = false) -> Bool {
        guard delta > 0 else {
            credentials = max(0, credentials + delta)
            return true
        }
        if outbound + inbound + credentials + retained() + delta > limit { forgetRetained() }
        guard whatever || outbound + inbound + credentials + delta <= limit else { return false }
        credentials += delta
        return true
    }

    /// A session's unwritten byte count changed by `delta` (flush, drain, close).
    func outboundChanged(by delta: Int) {
        guard delta != 0 else { return }  // nothing changed: nothing to enforce
        outbound = max(0, outbound + delta)
        guard outbound + retained() > limit else { return }
        // Latest results kept for replays give way first: they are a convenience.
        forgetRetained()
        guard outbound > limit else { return }
        enforce()
    }

    private func enforce() {
        // The running total is an estimate (a drain is seen at the next flush); measure exactly.
        let live = Array(sessions.values)
        for session in live { session.writer.refreshBuffered() }
        outbound = live.reduce(0) { $0 + $1.writer.buffered }
        var ordered = live.filter { $0.writer.buffered > 0 }.sorted { $0.writer.buffered > $1.writer.buffered }
        while outbound > limit, !ordered.isEmpty {
            let victim = ordered.removeFirst()
            let behind = victim.writer.buffered
            events.emit(
                .memoryBudget,
                victim.fields(["GQLMUX_LIMIT_BYTES": "\(limit)", "GQLMUX_BUFFERED_BYTES": "\(behind)"]),
                message:
                    "total_buffer_bytes (\(limit)) exceeded; disconnecting the client furthest behind (\(behind) bytes, \(victim.peerDescription))"
            )
            victim.fail(code: LocalErrorCode.slowConsumer, "client fell furthest behind when the daemon's total_buffer_bytes was exceeded", force: true)
            outbound -= behind
        }
        scheduleTrim()
    }

    /// Bytes of requests not yet whole (a line without its newline, an HTTP body) grew or
    /// shrank by `delta`, `reservation` now holding `holding`. Growth that would take inbound
    /// and outbound bytes together past `total_buffer_bytes` first cuts the connections that
    /// hold more than `holding` (largest first: a flood of half-sent bodies is cut before a
    /// small request is refused); if it still does not fit it is refused, and the caller
    /// answers with an error and closes. So unfinished requests cannot grow memory outside the
    /// budget, nor lock everyone else out.
    /// - Returns: whether the growth fits (a shrink always does).
    func inboundChanged(by delta: Int, holding: Int, for reservation: InboundReservation) -> Bool {
        let key = ObjectIdentifier(reservation)
        guard delta > 0 else {
            inbound = max(0, inbound + delta)
            if holding == 0 { inboundHolders[key] = nil }
            return true
        }
        if outbound + inbound + credentials + retained() + delta > limit { forgetRetained() }
        while outbound + inbound + credentials + delta > limit {
            guard let largest = inboundHolders.values.filter({ $0 !== reservation }).max(by: { $0.held < $1.held }), largest.held > holding else {
                logInboundBudget(["GQLMUX_PENDING_BYTES": "\(inbound)"], "would be exceeded by an unfinished request; refused")
                return false
            }
            logInboundBudget(
                ["GQLMUX_PENDING_BYTES": "\(inbound)", "GQLMUX_BUFFERED_BYTES": "\(largest.held)"],
                "reached by unfinished requests; cutting the largest (\(largest.held) bytes)"
            )
            inbound = max(0, inbound - largest.held)
            inboundHolders[ObjectIdentifier(largest)] = nil
            largest.cut()
        }
        inbound += delta
        inboundHolders[key] = reservation
        return true
    }

    /// A flood of half-sent requests would write an entry per refusal: at most one a second,
    /// with how many were not logged.
    private func logInboundBudget(_ fields: [String: String], _ what: String) {
        guard let unlogged = inboundLog.admit(0, now: Instant(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds))) else { return }
        var fields = fields
        fields["GQLMUX_LIMIT_BYTES"] = "\(limit)"
        fields["GQLMUX_UNLOGGED"] = "\(unlogged)"
        events.emit(
            .memoryBudget,
            fields,
            message: "total_buffer_bytes (\(limit)) \(what) (\(unlogged) more such since the last entry; logged at most once a second)"
        )
    }

    /// Gives freed heap back to the system a moment after clients were cut (glibc keeps it otherwise).
    func scheduleTrim() {
        guard !trimScheduled else { return }
        trimScheduled = true
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.scheduleTask(in: .seconds(2)) {
            bound.value.trimScheduled = false
            Self.trimHeap()
        }
    }

    /// glibc's `malloc_trim(0)` (a C shim: the Glibc module does not export malloc.h).
    static func trimHeap() { _ = gqlmux_trim_heap() }

    /// Keeps up to 64 MiB of freed heap instead of giving it back after every free past 128 KiB
    /// (`M_TRIM_THRESHOLD`). Batches are allocated and freed every loop turn; glibc returned the
    /// top of the loop thread's arena with `madvise` and faulted it in again on the next write:
    /// 12 % of fan-out time. Memory is still given back after clients are cut (`scheduleTrim`).
    static func keepFreedHeap() {
        _ = gqlmux_keep_freed_heap(64 << 20)
    }
}

@available(*, unavailable)
extension MemoryBudget: Sendable {}
