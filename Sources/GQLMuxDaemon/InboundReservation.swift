import EndpointServer

/// One connection's share of the memory budget for a request it has not finished sending:
/// the connection's reader says how many such bytes it holds now, and the daemon's budget
/// (``MemoryBudget/inboundChanged(by:holding:for:)``) grants or refuses the difference. Released whole when the
/// connection closes. When the budget is full, the connection holding the most is cut first
/// (``onCut``), so a flood of half-sent requests cannot lock out a small one.
///
/// Not `Sendable`: used on the daemon's loop only, by the handlers of one channel.
final class InboundReservation: InboundBudget {
    private let budget: MemoryBudget
    private(set) var held = 0
    /// Answers the connection's request with an error and closes it; set by its reader.
    var onCut: () -> Void = {}

    init(budget: MemoryBudget) { self.budget = budget }

    /// The connection now holds `bytes` of unfinished requests.
    /// - Returns: false when that does not fit the budget (nothing is reserved then).
    func hold(_ bytes: Int) -> Bool {
        let delta = bytes - held
        guard delta != 0 else { return true }
        guard budget.inboundChanged(by: delta, holding: bytes, for: self) else { return false }
        held = bytes
        return true
    }

    func release() { _ = hold(0) }

    /// The budget takes this connection's bytes back to make room for a smaller request.
    func cut() {
        held = 0
        onCut()
    }
}

@available(*, unavailable)
extension InboundReservation: Sendable {}
