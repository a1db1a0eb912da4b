/// When a new identity lane of one upstream may open its first connection: a burst of
/// ``burst`` lanes at once (a user's whole set of identities, `max_identities_per_uid`'s
/// default), then one per `interval`, the upstream's first reconnect wait. Apps that keep
/// presenting new credentials (each a new lane: a connection and a `connection_init`) so open
/// connections no faster than the upstream's own reconnects would. A token bucket, pure: the
/// caller gives the time.
package struct LanePacing: Equatable {
    /// Lanes that may start at once.
    package static let burst = 16

    /// Nanoseconds between lane starts past the burst; 0 paces nothing.
    package let interval: UInt64
    /// Starts the bucket holds as of `asOf`, in nanoseconds of starts (``burst`` × `interval` full).
    private var credit: UInt64
    private var asOf: UInt64

    /// `interval` nil (reconnects disabled): one a second.
    package init(interval: Duration?, now: UInt64) {
        let nanoseconds = interval.map { UInt64(max(0, $0.components.seconds)) * 1_000_000_000 + UInt64(max(0, $0.components.attoseconds / 1_000_000_000)) }
        self.interval = nanoseconds ?? 1_000_000_000
        credit = self.interval * UInt64(Self.burst)
        asOf = now
    }

    /// Takes a start slot: how many nanoseconds from `now` the lane must wait before its first
    /// connection (0: at once). Slots are given in order: each later ask waits behind the ones
    /// already given.
    package mutating func admit(now: UInt64) -> UInt64 {
        guard interval > 0 else { return 0 }
        let full = interval * UInt64(Self.burst)
        if now > asOf {
            credit = min(full, credit + (now - asOf))
            asOf = now
        }
        if credit >= interval {
            credit -= interval
            // A slot in the bucket: at once, unless earlier asks are still queued past `now`.
            return asOf > now ? asOf - now : 0
        }
        // Past the burst: the next slot is when the bucket has refilled one interval.
        let wait = interval - credit
        credit = 0
        asOf += wait
        return asOf - now
    }
}
