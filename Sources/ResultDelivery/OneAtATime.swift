/// One event at a time on the daemon's loop, shared by the ``Switchboard`` and the ``Fanout``:
/// what arrives while another event is handled (a slow client cut by its own write in the
/// middle of a delivery, a carrier's update while an action is performed) runs after it, in
/// order. So the multiplexer core is never entered while it is mid-iteration, and every list
/// the fan-out walks stays as it was for the whole walk.
///
/// Used only on the daemon's loop (its owners assert it at their entry points).
package final class OneAtATime {
    private var busy = false
    package init() {}

    private var waiting: [() -> Void] = []
    /// Called each time the outermost handling ends, with nothing left waiting.
    package var whenIdle: (() -> Void)?

    /// Whether an event is being handled now: a new one must wait (``later(_:)``).
    package var isBusy: Bool { busy }

    /// Runs `body` after the event being handled, and after those that arrived before it.
    package func later(_ body: @escaping () -> Void) {
        precondition(busy, "only an event that arrives during another waits")
        waiting.append(body)
    }

    /// Runs `body` as the event being handled, then whatever arrived meanwhile, in order. Called
    /// while another is handled (a nested step of the same event), it runs `body` at once.
    package func run(_ body: () -> Void) {
        guard !busy else { return body() }
        busy = true
        body()
        var next = 0
        while next < waiting.count {
            waiting[next]()
            next += 1
        }
        waiting.removeAll(keepingCapacity: true)
        busy = false
        whenIdle?()
    }
}
