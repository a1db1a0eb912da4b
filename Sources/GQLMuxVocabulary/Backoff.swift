/// Capped exponential backoff with jitter, as a pure function.
///
/// The n-th retry of an outage waits `min(max, base × multiplier^(n-1))`, scaled by a factor
/// drawn uniformly from `[1 - jitter, 1 + jitter]`. An `initial` of zero makes the first
/// retry immediate; later retries then grow from one second, so a server that keeps
/// refusing us never becomes a hot loop.
package struct Backoff: Sendable, Equatable {
    /// First wait; zero means the first retry is immediate; nil disables reconnection.
    package var initial: Duration?
    package var maximum: Duration
    package var multiplier: Double
    /// Fraction of the delay that is randomised, 0...1.
    package var jitter: Double
    /// Retries per outage; 0 means unlimited. The count restarts when a connection is acked.
    package var maxAttempts: Int

    package init(
        initial: Duration? = .seconds(1),
        maximum: Duration = .seconds(30),
        multiplier: Double = 2.0,
        jitter: Double = 0.2,
        maxAttempts: Int = 0
    ) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
        self.maxAttempts = maxAttempts
    }

    /// The wait before retry number `attempt` (1-based), or nil when no retry is allowed.
    /// - Parameters:
    ///   - attempt: which retry of this outage is about to be made, starting at 1.
    ///   - random: a value in `0..<1` from the injected jitter source.
    package func delay(attempt: Int, random: Double) -> Duration? {
        guard let initial, attempt >= 1 else { return nil }
        if maxAttempts > 0 && attempt > maxAttempts { return nil }
        if attempt == 1 && initial == .zero { return .zero }
        let base = initial == .zero ? 1.0 : initial.seconds
        let exponent = Double(attempt - 1)
        let grown = base * pow(max(multiplier, 1.0), exponent)
        let capped = min(maximum.seconds, grown.isFinite ? grown : maximum.seconds)
        let spread = min(max(jitter, 0), 1)
        let factor = 1 - spread + 2 * spread * min(max(random, 0), 1)
        return .seconds(double: max(0, capped * factor))
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
