import GQLMuxVocabulary
import Testing

@testable import GQLMuxDaemon

/// The once-a-second journal limit every flood-prone event uses, on a manual clock.
@Suite struct LogLimiterTests {
    private func at(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }

    @Test func oneEntryASecondPerKeyAndTheNextSaysHowManyWereLeftOut() {
        var limiter = LogLimiter<String>()
        #expect(limiter.admit("a", now: at(0)) == 0)
        #expect(limiter.admit("a", now: at(10)) == nil)
        #expect(limiter.admit("a", now: at(999)) == nil)
        #expect(limiter.admit("b", now: at(500)) == 0, "another key has its own limit")
        #expect(limiter.admit("a", now: at(1000)) == 2, "the two left out are counted in the next entry")
        #expect(limiter.admit("a", now: at(1500)) == nil)
        #expect(limiter.admit("a", now: at(5000)) == 1)
        #expect(limiter.admit("a", now: at(9000)) == 0)
    }

    @Test func aSenderVaryingItsKeyCannotGrowItWithoutBound() {
        var limiter = LogLimiter<Int>(capacity: 3)
        for key in 0..<3 { #expect(limiter.admit(key, now: at(0)) == 0) }
        #expect(limiter.admit(0, now: at(1)) == nil, "remembered while under capacity")
        #expect(limiter.admit(3, now: at(2)) == 0, "a fourth key starts afresh")
        #expect(limiter.admit(0, now: at(3)) == 0, "the old ones were forgotten")
    }
}
