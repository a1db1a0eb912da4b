import GQLMuxVocabulary

/// Blame and quarantine: whatever one local client sends must not put everyone into a
/// reconnect loop, and no outage may cost anyone a subscription.
///
/// Only a close that blames the client side (4400, 1007, 1009, 4409: "you sent something I
/// cannot accept") is evidence against an operation. Every other close (1000, 1001, 1006,
/// 1011–1014, a network error, a killed server) is an outage: nobody is charged, and every
/// subscription is re-sent right after the next ack, whatever was sent just before. A rolling
/// deploy drops connections right after clients re-subscribed, again and again; such a close
/// says nothing about what was sent, so it must not hold back or end anything.
///
/// States of one operation: clean → charged (on probation, in a group) → clean again (its
/// group passed a trial) or quarantined (finished with `UPSTREAM_CLOSED`, never re-sent).
/// Transitions, all on a client-blaming close:
/// - Within `blameWindow` of a send, it charges the operation(s) sent last (a server closes on
///   what it read last; a burst shares one instant). A sole suspect is quarantined at once: the
///   other subscribers pay one reconnect. Several form a probation group.
/// - After each ack the clean operations are re-sent, then the first group (a trial). A
///   client-blaming close within `blameWindow` of a trial blames that group and any operation
///   sent for the first time during it (a newcomer): a suspect alone is quarantined, more are
///   split in halves, tried one after the other (bisection: log2(n) more closes at most). It
///   names the newcomer sent last, when that one alone was. A group that passes its window is
///   clean again, and the next group is tried.
/// - An outage during a trial interrupts it: the same group is tried again after the next ack.
/// - A connection that stays up `healthyAfter` ends the trial of everything it carries.
extension TransportStateMachine {
    mutating func chargeBlame(generation gen: Int, closeCode: CloseCode?, reason: String, now: Instant, into actions: inout [TransportAction]) {
        // An outage is never evidence: an interrupted trial stays first in line, unchanged.
        guard let code = closeCode, code.blamesClient else { return }
        if case .connected(let c) = phase, let trial = c.trial, let passesAt = c.probationAt, now < passesAt {
            // A trial was in flight: its group is to blame, and with it any operation sent for
            // the first time since (a new subscribe, or one that arrived while reconnecting and
            // went out in the same instant as the trial): the server may have refused that one.
            probation.removeFirst()
            let newcomers = sortedIDs().filter { id in
                guard !trial.contains(id), let op = operations[id], op.sentOn == gen, op.onTrial, let at = op.sentAt else { return false }
                return at + options.blameWindow >= passesAt  // sent since the trial began
            }
            let alive = trial.filter { operations[$0] != nil } + newcomers
            // It names what was sent last, when one operation alone was.
            if !newcomers.isEmpty, let latest = alive.compactMap({ operations[$0]?.sentAt }).max() {
                let last = alive.filter { operations[$0]?.sentAt == latest }
                if last.count == 1 {
                    quarantine(last[0], closeCode: code, reason: reason, into: &actions)
                    // The interrupted trial neither passed nor failed: it is tried again.
                    let rest = trial.filter { operations[$0] != nil }
                    if !rest.isEmpty { probation.insert(rest, at: 0) }
                    return
                }
            }
            if alive.count == 1 {
                quarantine(alive[0], closeCode: code, reason: reason, into: &actions)
            } else if !alive.isEmpty {
                let half = alive.count / 2
                probation.insert(contentsOf: [Array(alive[..<half]), Array(alive[half...])], at: 0)
            }
            return
        }
        let recent = sortedIDs().filter { id in
            guard let op = operations[id], op.sentOn == gen, let at = op.sentAt else { return false }
            return now - at <= options.blameWindow
        }
        guard let latest = recent.compactMap({ operations[$0]?.sentAt }).max() else { return }
        let suspects = recent.filter { operations[$0]?.sentAt == latest }
        if suspects.count == 1 {
            quarantine(suspects[0], closeCode: code, reason: reason, into: &actions)
            return
        }
        let held = Set(probation.joined())
        let group = suspects.filter { !held.contains($0) }
        if !group.isEmpty { probation.append(group) }
    }

    private mutating func quarantine(_ id: OperationID, closeCode: CloseCode, reason: String, into actions: inout [TransportAction]) {
        actions.append(.event(.quarantined(id: id, closeCode: closeCode)))
        let message =
            "quarantined: the upstream closed the connection (\(closeCode)\(reason.isEmpty ? "" : " \(reason)")), "
            + "blaming what it was sent, right after this operation; it is not sent again"
        finish(id, .error(.transport(.upstreamClosed(message: message, closeCode: closeCode, closeReason: reason))), into: &actions)
    }

    /// Sends the first probation group, if any, as a trial on the current connection.
    mutating func startNextTrial(now: Instant, into actions: inout [TransportAction]) {
        guard case .connected(var c) = phase else { return }
        probation = probation.map { $0.filter { operations[$0] != nil } }.filter { !$0.isEmpty }
        c.trial = nil
        c.probationAt = nil
        if let group = probation.first {
            c.trial = group
            c.probationAt = now + options.blameWindow
        }
        phase = .connected(c)
        for id in c.trial ?? [] where operations[id]?.state != .paused {
            send(id, generation: c.generation, now: now, onTrial: true, into: &actions)
        }
    }

    /// The trial group stayed up for `blameWindow`: it is clean; try the next group.
    mutating func trialPassed(now: Instant, into actions: inout [TransportAction]) {
        guard case .connected(let c) = phase, let trial = c.trial else { return }
        if probation.first == trial { probation.removeFirst() }
        startNextTrial(now: now, into: &actions)
    }

    /// The connection stayed up for `healthyAfter`: the outage is over, and what it carries is
    /// no longer on trial.
    mutating func markHealthy(generation gen: Int) {
        resetFailures()
        for id in operations.keys where operations[id]?.sentOn == gen { operations[id]?.onTrial = false }
    }
}
