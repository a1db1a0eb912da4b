import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore

/// The one wake-up a transport keeps at its state machine's next deadline: scheduled anew only
/// when that deadline changes, so the many events that leave it as it was cost nothing. Owned by
/// a loop-confined transport and used on its loop only.
struct DeadlineTimer {
    private var task: Scheduled<Void>?
    private var deadline: Instant?

    /// Wakes `fire` at `deadline` (nil: never), replacing the pending wake-up unless it is for
    /// the same instant. `fire` must call ``fired()`` first.
    mutating func set(_ deadline: Instant?, on loop: any EventLoop, _ fire: @escaping @Sendable () -> Void) {
        guard deadline != self.deadline else { return }
        task?.cancel()
        self.deadline = deadline
        task = deadline.map { loop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, $0.nanoseconds))), fire) }
    }

    /// The pending wake-up ran.
    mutating func fired() {
        task = nil
        deadline = nil
    }

    mutating func cancel() {
        task?.cancel()
        fired()
    }
}
