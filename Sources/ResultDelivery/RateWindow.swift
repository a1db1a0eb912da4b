/// Counts per whole second of the monotonic clock, over the last ``seconds``: what a rate "over
/// the last 10 s" reads. Pure (the caller passes the time), ten counters, no allocation: a
/// client or an operation keeps one and adds to it once per batch or run, never per result.
package struct RateWindow {
    package static let seconds = 10

    private var counts: InlineArray<10, Int> = .init(repeating: 0)
    /// The second the newest count belongs to (nil: nothing counted yet).
    private var newest: Int64?

    package init() {}

    /// Adds `count` to second `second` (the clock's whole seconds). A second before the newest
    /// counts in the newest (the clock does not go back; a caller's older reading may).
    package mutating func add(_ count: Int, second: Int64) {
        let now = advance(to: second)
        counts[Self.slot(now)] &+= count
    }

    /// Counts per second over the window that ends at `nanoseconds`: the last nine whole
    /// seconds and the current part-second, or since `start` when that is later, but over one
    /// second at least (a result in a counter's first milliseconds is not a rate of hundreds).
    package func perSecond(at nanoseconds: UInt64, since start: UInt64) -> Double {
        let second = Int64(nanoseconds / 1_000_000_000)
        guard let newest, newest > second - Int64(Self.seconds) else { return 0 }
        var sum = 0
        var s = max(second - Int64(Self.seconds) + 1, newest - Int64(Self.seconds) + 1)
        while s <= min(second, newest) {
            sum &+= counts[Self.slot(s)]
            s += 1
        }
        let windowStart = UInt64(max(0, second - Int64(Self.seconds) + 1)) * 1_000_000_000
        let from = max(windowStart, start)
        let span = Double(nanoseconds &- min(from, nanoseconds)) / 1e9
        return Double(sum) / max(span, 1)
    }

    /// Moves the window so it ends at `second`, clearing the seconds it passes; the second the
    /// count goes to.
    private mutating func advance(to second: Int64) -> Int64 {
        guard let newest else {
            self.newest = second
            return second
        }
        guard second > newest else { return newest }
        if second - newest >= Int64(Self.seconds) {
            for index in counts.indices { counts[index] = 0 }
        } else {
            var s = newest + 1
            while s <= second {
                counts[Self.slot(s)] = 0
                s += 1
            }
        }
        self.newest = second
        return second
    }

    private static func slot(_ second: Int64) -> Int { Int(second % Int64(seconds)) }
}
