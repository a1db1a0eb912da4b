/// When new identity lanes of one upstream may open their first connections: a burst of
/// ``burst`` at once (a user's whole set of identities, `max_identities_per_uid`'s default),
/// then one per `interval`, the upstream's first reconnect wait. Apps that keep presenting new
/// credentials (each a new lane: a connection and a `connection_init`) so open connections no
/// faster than the upstream's own reconnects would. A token bucket, pure: the caller gives the
/// time, and takes a token only for a lane that starts (one forgotten while it waited takes none).
package struct LanePacing: Equatable {
    /// Lanes that may start at once.
    package static let burst = 16

    /// Nanoseconds between lane starts past the burst; 0 paces nothing.
    package private(set) var interval: UInt64
    /// Tokens held as of `asOf`, in nanoseconds (`interval` a token; ``burst`` tokens full).
    private var credit: UInt64
    private var asOf: UInt64

    /// `interval` nil (reconnects disabled): one a second.
    package init(interval: Duration?, now: UInt64) {
        self.interval = interval.map(Self.nanoseconds) ?? 1_000_000_000
        credit = self.interval * UInt64(Self.burst)
        asOf = now
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let seconds = max(0, duration.components.seconds)
        let fraction = max(0, duration.components.attoseconds / 1_000_000_000)
        return UInt64(seconds) * 1_000_000_000 + UInt64(fraction)
    }

    private mutating func refill(now: UInt64) {
        guard now > asOf else { return }
        credit = min(interval * UInt64(Self.burst), credit + (now - asOf))
        asOf = now
    }

    /// Takes a token if one is there at `now`: true when a lane may start now.
    package mutating func take(now: UInt64) -> Bool {
        guard interval > 0 else { return true }
        refill(now: now)
        guard credit >= interval else { return false }
        credit -= interval
        return true
    }

    /// The same bucket paced by a new `interval` (a reload changed the upstream's first reconnect
    /// wait): the tokens it holds at `now` are kept, so a reload grants no fresh burst. (A bucket
    /// that paced nothing held a full burst.)
    package mutating func retime(interval newInterval: UInt64, now: UInt64) {
        guard newInterval != interval else { return }
        refill(now: now)
        let tokens = interval == 0 ? Double(Self.burst) : min(Double(Self.burst), Double(credit) / Double(interval))
        interval = newInterval
        credit = UInt64(tokens * Double(newInterval))
        asOf = max(asOf, now)
    }

    /// Nanoseconds from `now` until the next token (0: one is there).
    package func untilNext(now: UInt64) -> UInt64 {
        guard interval > 0 else { return 0 }
        let held = now > asOf ? min(interval * UInt64(Self.burst), credit + (now - asOf)) : credit
        return held >= interval ? 0 : interval - held
    }
}
