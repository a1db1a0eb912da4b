import GQLMuxVocabulary

/// When each query or mutation times out (`operationTimeout`). Every deadline is its
/// operation's start plus the same timeout, and the clock only moves forward, so deadlines come
/// in the order operations were added: the earliest is the oldest one still waiting. It is found
/// without a scan, which matters because the transport asks for its next deadline after every
/// frame, many queries may be in flight, and subscriptions are never here.
struct SingleDeadlines<ID: Hashable> {
    private var deadlines: [ID: Instant] = [:]
    /// Ids in the order added; from `head` on, the first is always still waiting (or none is).
    private var order: [ID] = []
    private var head = 0

    var isEmpty: Bool { deadlines.isEmpty }

    var earliest: Instant? { head < order.count ? deadlines[order[head]] : nil }

    mutating func add(_ id: ID, deadline: Instant) {
        deadlines[id] = deadline
        order.append(id)
    }

    mutating func remove(_ id: ID) {
        guard deadlines.removeValue(forKey: id) != nil else { return }
        dropFinishedHead()
    }

    /// The ids whose deadline is at or before `now`, oldest first; they are removed.
    mutating func due(now: Instant) -> [ID] {
        var due: [ID] = []
        while head < order.count, let deadline = deadlines[order[head]], deadline <= now {
            due.append(order[head])
            deadlines[order[head]] = nil
            dropFinishedHead()
        }
        return due
    }

    private mutating func dropFinishedHead() {
        while head < order.count, deadlines[order[head]] == nil { head += 1 }
        if head == order.count {
            order.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1_024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
