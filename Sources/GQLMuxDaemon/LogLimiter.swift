import GQLMuxVocabulary

/// Keeps the journal readable under a flood: at most one entry per key each `interval`, and a
/// count of the ones it left out, which the next entry for that key reports
/// (`GQLMUX_UNLOGGED`). Pure: the caller says what time it is.
package struct LogLimiter<Key: Hashable> {
    private let interval: Duration
    private let capacity: Int
    private var keys: [Key: (at: Instant, unlogged: Int)] = [:]

    /// - Parameters:
    ///   - interval: the least time between two entries for one key.
    ///   - capacity: how many keys are remembered; past it every key starts afresh (a sender that
    ///     varies its key cannot grow this without bound).
    package init(interval: Duration = .seconds(1), capacity: Int = 1024) {
        self.interval = interval
        self.capacity = capacity
    }

    /// Whether an entry for `key` may be written at `now`: nil when it is left out (and counted),
    /// else how many were left out since the last one written.
    package mutating func admit(_ key: Key, now: Instant) -> Int? {
        if let last = keys[key], now - last.at < interval {
            keys[key] = (last.at, last.unlogged + 1)
            return nil
        }
        if keys[key] == nil, keys.count >= capacity { keys = [:] }
        let unlogged = keys[key]?.unlogged ?? 0
        keys[key] = (now, 0)
        return unlogged
    }
}
