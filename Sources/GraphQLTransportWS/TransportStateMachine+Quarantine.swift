/// Blame and quarantine: whatever one local client sends must not put everyone into a
/// reconnect loop.
///
/// States of one operation: clean (0 charges) → charged (1) → quarantined (2: finished with
/// `UPSTREAM_CLOSED`, never re-sent). Transitions:
/// - A close that blames the client side (4400, 1007, 1009, 4409) charges the operation(s) sent
///   last on that connection, within `blameWindow` before it (a server closes on what it read
///   last; a re-subscribe burst shares one instant, so all of it). A sole suspect is charged
///   twice (certain). Any other close (a crash, 1006, 1011) within the window charges only the
///   latest operations on trial (sent for the first time, or alone on probation), once: a
///   server restart right after a re-subscribe burst never charges the whole table.
/// - After a reconnect, charged operations are not re-sent with the others: each goes alone,
///   `blameWindow` apart, after the clean ones ("probation"), so a second close has one suspect.
/// - A connection that stays up for `healthyAfter` clears the charges of what it carried.
extension TransportStateMachine {
    static let blamingCloseCodes: Set<UInt16> = [4400, 1007, 1009, 4409]

    mutating func chargeBlame(generation gen: Int, closeCode: UInt16?, reason: String, now: Instant, into actions: inout [TransportAction]) {
        let strong = closeCode.map(Self.blamingCloseCodes.contains) ?? false
        let recent = sortedIDs().filter { id in
            guard let op = operations[id], op.sentOn == gen, let at = op.sentAt else { return false }
            return now - at <= options.blameWindow && (strong || op.onTrial)
        }
        // The server reacts to what it read last: blame the latest send (a re-subscribe burst
        // shares one instant, so all of it).
        guard let latest = recent.compactMap({ operations[$0]?.sentAt }).max() else { return }
        let suspects = recent.filter { operations[$0]?.sentAt == latest }
        let charge = strong && suspects.count == 1 ? 2 : 1
        let code = closeCode.map(String.init) ?? "1006"
        for id in suspects {
            operations[id]!.charges += charge
            guard operations[id]!.charges >= 2 else { continue }
            actions.append(.event(.quarantined(id: id, closeCode: closeCode)))
            let message =
                "quarantined: the upstream closed the connection (\(code)\(reason.isEmpty ? "" : " \(reason)")) "
                + "right after this operation was sent; it is not sent again"
            finish(id, .error(.local(code: ErrorCode.upstreamClosed, message: message, closeCode: closeCode ?? 1006, closeReason: reason)), into: &actions)
        }
    }

    /// The connection stayed up for `healthyAfter`: the outage is over.
    mutating func markHealthy(generation gen: Int) {
        resetFailures()
        for id in operations.keys where operations[id]?.sentOn == gen {
            operations[id]?.charges = 0
            operations[id]?.onTrial = false
        }
    }

    /// Sends the oldest charged operation that waits, alone, and schedules the next one.
    mutating func sendNextOnProbation(now: Instant, into actions: inout [TransportAction]) {
        guard case .connected(var c) = phase else { return }
        let waiting = sortedIDs().filter { id in
            guard let op = operations[id] else { return false }
            return op.sentOn == nil && op.charges > 0 && op.state != .paused
        }
        guard let next = waiting.first else { return }
        send(next, generation: c.generation, now: now, onTrial: true, into: &actions)
        if waiting.count > 1 {
            c.probationAt = now + options.blameWindow
            phase = .connected(c)
        }
    }
}
