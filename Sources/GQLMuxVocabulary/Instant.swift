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

    /// The seconds with `decimals` digits after the point, rounded: `1.250` for 1.25 s and 3.
    package func formattedSeconds(decimals: Int) -> String {
        let scale = (0..<decimals).reduce(Int64(1)) { r, _ in r * 10 }
        let scaled = (Double(nanoseconds) / 1e9 * Double(scale)).rounded()
        guard scaled.magnitude < 9e18 else { return String(seconds) }
        let units = Int64(scaled)
        let whole = String(units.magnitude / UInt64(scale))
        let sign = units < 0 ? "-" : ""
        guard decimals > 0 else { return sign + whole }
        let fraction = String(units.magnitude % UInt64(scale))
        return sign + whole + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// A duration from fractional seconds, as config files give them.
    package static func seconds(double value: Double) -> Duration { .nanoseconds(Int64(value * 1e9)) }
}
