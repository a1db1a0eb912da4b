import Testing

@testable import ResultDelivery

/// A subscriber's rate over the last seconds (the operator's view), on a manual clock.
@Suite struct RateWindowTests {
    private static let second: UInt64 = 1_000_000_000

    @Test func aSteadyRateReadsAsItselfAndOldSecondsDropOut() {
        var window = RateWindow()
        for s in Int64(100)..<120 { window.add(5, second: s) }
        // At 119.5 s the window is 110…119.5: ten seconds of 5 in 9.5 s.
        #expect(abs(window.perSecond(at: 119 * Self.second + Self.second / 2, since: 0) - 50.0 / 9.5) < 0.001)
        // Nothing for 20 s: nothing in the window.
        #expect(window.perSecond(at: 140 * Self.second, since: 0) == 0)
        // Seconds skipped while idle are cleared, not read again: at 125.5 s the window is
        // 116…125.5, which holds 116…119's 5 each and 125's 3; 120…124 were cleared.
        window.add(3, second: 125)
        #expect(abs(window.perSecond(at: 125 * Self.second + Self.second / 2, since: 0) - 23.0 / 9.5) < 0.001)
        // Ten seconds on, only 125's 3 is left in it.
        #expect(abs(window.perSecond(at: 134 * Self.second + Self.second / 2, since: 0) - 3.0 / 9.5) < 0.001)
    }

    @Test func aYoungCounterIsReadOverItsOwnLife() {
        var window = RateWindow()
        window.add(10, second: 50)
        // Opened at 50.0 s, read at 52.0 s: 10 in 2 s.
        #expect(abs(window.perSecond(at: 52 * Self.second, since: 50 * Self.second) - 5) < 0.001)
    }

    @Test func aCounterYoungerThanASecondIsReadOverOne() {
        var window = RateWindow()
        window.add(1, second: 50)
        #expect(window.perSecond(at: 50 * Self.second + Self.second / 40, since: 50 * Self.second) == 1)
    }

    @Test func anOlderSecondCountsInTheNewest() {
        var window = RateWindow()
        window.add(1, second: 10)
        window.add(1, second: 9)  // a reading taken before the last one
        #expect(abs(window.perSecond(at: 10 * Self.second, since: 0) * 9 - 2) < 0.001)
    }
}
