/// A point on a monotonic clock, in nanoseconds. The state machine never reads a clock:
/// every event carries `now`, so tests drive time by hand.
package struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    package var nanoseconds: Int64
    package init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
    package static func + (lhs: Instant, rhs: Duration) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &+ rhs.nanoseconds)
    }
    package static func - (lhs: Instant, rhs: Instant) -> Duration { .nanoseconds(lhs.nanoseconds - rhs.nanoseconds) }
    package var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled &+ attoseconds / 1_000_000_000
    }

    /// The duration in seconds as a `Double`.
    package var seconds: Double { Double(nanoseconds) / 1e9 }

    /// A duration from fractional seconds, as config files give them.
    package static func seconds(double value: Double) -> Duration { .nanoseconds(Int64(value * 1e9)) }
}
