/// One connection's share of the memory budget for a request it has not finished sending:
/// the connection's reader says how many such bytes it holds now, and the fan-out's budget
/// (`Fanout.inboundChanged`) grants or refuses the difference. Released whole when the
/// connection closes.
///
/// Not `Sendable`: used on the daemon's loop only, by the handlers of one channel.
final class InboundReservation {
    private let fanout: Fanout
    private(set) var held = 0

    init(fanout: Fanout) { self.fanout = fanout }

    /// The connection now holds `bytes` of unfinished requests.
    /// - Returns: false when that does not fit the budget (nothing is reserved then).
    func hold(_ bytes: Int) -> Bool {
        let delta = bytes - held
        guard delta != 0 else { return true }
        guard fanout.inboundChanged(by: delta) else { return false }
        held = bytes
        return true
    }

    func release() { _ = hold(0) }
}

@available(*, unavailable)
extension InboundReservation: Sendable {}
