import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore

/// The one wake-up a transport keeps at its state machine's next deadline. A deadline that moves
/// later (every received message moves the keep-alive ping) leaves the pending wake-up as it
/// is: it fires early, the machine finds nothing due, and the next one is set for the deadline
/// then. Cancelling and scheduling anew for every message was 10 % of the time a result took
/// through the daemon. Owned by a loop-confined transport and used on its loop only.
struct DeadlineTimer {
    private var task: Scheduled<Void>?
    /// When the pending wake-up runs.
    private var scheduled: Instant?

    /// Wakes `fire` at `deadline` at the latest (nil: never), replacing the pending wake-up
    /// only when that one is later. `fire` must call ``fired()`` first, and must do nothing
    /// harmful when it runs before anything is due.
    mutating func set(_ deadline: Instant?, on loop: any EventLoop, _ fire: @escaping @Sendable () -> Void) {
        guard let deadline else { return cancel() }
        if let scheduled, scheduled <= deadline { return }
        task?.cancel()
        scheduled = deadline
        task = loop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, deadline.nanoseconds))), fire)
    }

    /// Whether ``set(_:on:_:)`` would change anything for `deadline`: checked first, so the
    /// common case (a deadline moved later) does not allocate the wake-up's closure.
    func wouldChange(for deadline: Instant?) -> Bool {
        guard let deadline else { return task != nil }
        guard let scheduled else { return true }
        return deadline < scheduled
    }

    /// The pending wake-up ran.
    mutating func fired() {
        task = nil
        scheduled = nil
    }

    mutating func cancel() {
        task?.cancel()
        fired()
    }
}
