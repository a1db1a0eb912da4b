import Testing
import Upstream

/// Identity lanes start no faster than the upstream's reconnects would, past a burst; only a
/// lane that starts takes a token.
@Suite struct LanePacingTests {
    let second: UInt64 = 1_000_000_000

    /// How many of `asks` lanes asking at `now` get a token.
    private func started(_ pacing: inout LanePacing, asks: Int, now: UInt64) -> Int {
        var count = 0
        for _ in 0..<asks where pacing.take(now: now) { count += 1 }
        return count
    }

    @Test func aBurstStartsAtOnceThenOneAnInterval() {
        var pacing = LanePacing(interval: .seconds(1), now: 0)
        #expect(started(&pacing, asks: LanePacing.burst + 1, now: 0) == LanePacing.burst)
        #expect(pacing.untilNext(now: 0) == second)
        #expect(pacing.untilNext(now: second / 4) == 3 * second / 4)
        #expect(started(&pacing, asks: 1, now: second - 1) == 0)
        #expect(started(&pacing, asks: 2, now: second) == 1)
        #expect(pacing.untilNext(now: second) == second)
    }

    @Test func aQuietUpstreamRefillsItsBurstAndNoMore() {
        var pacing = LanePacing(interval: .milliseconds(500), now: 0)
        _ = started(&pacing, asks: 100, now: 0)
        let later = 60 * second
        #expect(started(&pacing, asks: LanePacing.burst + 1, now: later) == LanePacing.burst)
        #expect(pacing.untilNext(now: later) == second / 2)
    }

    @Test func aSteadyChurnIsHeldToTheInterval() {
        // An app asks for a lane every 10 ms for 10 s: past the burst, one a second starts.
        var pacing = LanePacing(interval: .seconds(1), now: 0)
        var count = 0
        for i in 0..<1_000 { count += started(&pacing, asks: 1, now: UInt64(i) * 10_000_000) }
        #expect(count == LanePacing.burst + 9, "\(count) lanes started in 10 s")
    }

    @Test func immediateReconnectsPaceNothingAndDisabledOnesOneASecond() {
        var immediate = LanePacing(interval: .zero, now: 0)
        #expect(started(&immediate, asks: 100, now: 0) == 100)
        #expect(immediate.untilNext(now: 0) == 0)
        var disabled = LanePacing(interval: nil, now: 0)
        #expect(started(&disabled, asks: LanePacing.burst + 1, now: 0) == LanePacing.burst)
        #expect(disabled.untilNext(now: 0) == second)
    }

    @Test func aReloadThatChangesTheIntervalGrantsNoFreshBurst() {
        // The burst spent at 1 s; a reload makes it 500 ms: still empty, the next token in 500 ms.
        var pacing = LanePacing(interval: .seconds(1), now: 0)
        #expect(started(&pacing, asks: LanePacing.burst, now: 0) == LanePacing.burst)
        pacing.retime(interval: second / 2, now: 0)
        #expect(started(&pacing, asks: 1, now: 0) == 0)
        #expect(pacing.untilNext(now: 0) == second / 2)
        // Half a bucket held (8 tokens at 500 ms) is still 8 tokens at 2 s.
        var half = LanePacing(interval: .milliseconds(500), now: 0)
        _ = started(&half, asks: LanePacing.burst / 2, now: 0)
        half.retime(interval: 2 * second, now: 0)
        #expect(started(&half, asks: LanePacing.burst, now: 0) == LanePacing.burst / 2)
        #expect(half.untilNext(now: 0) == 2 * second)
        // From pacing nothing to one a second: a full burst, then the interval.
        var immediate = LanePacing(interval: .zero, now: 0)
        _ = started(&immediate, asks: 100, now: 0)
        immediate.retime(interval: second, now: 0)
        #expect(started(&immediate, asks: LanePacing.burst + 1, now: 0) == LanePacing.burst)
    }
}
