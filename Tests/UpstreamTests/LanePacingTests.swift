import Testing
import Upstream

/// Identity lanes start no faster than the upstream's reconnects would, past a burst.
@Suite struct LanePacingTests {
    let second: UInt64 = 1_000_000_000

    @Test func aBurstStartsAtOnceThenOneAnInterval() {
        var pacing = LanePacing(interval: .seconds(1), now: 0)
        for _ in 0..<LanePacing.burst { #expect(pacing.admit(now: 0) == 0) }
        // Past the burst, at the same moment: one more each second, in order.
        #expect(pacing.admit(now: 0) == second)
        #expect(pacing.admit(now: 0) == 2 * second)
        #expect(pacing.admit(now: 0) == 3 * second)
        // Asked later, the queue has moved on by as much.
        #expect(pacing.admit(now: 2 * second) == 2 * second)
    }

    @Test func aQuietUpstreamRefillsItsBurst() {
        var pacing = LanePacing(interval: .milliseconds(500), now: 0)
        for _ in 0..<(LanePacing.burst + 4) { _ = pacing.admit(now: 0) }
        // The queue ends 2 s from 0; a minute later the bucket is full again, never more.
        let later = 60 * second
        for _ in 0..<LanePacing.burst { #expect(pacing.admit(now: later) == 0) }
        #expect(pacing.admit(now: later) == second / 2)
    }

    @Test func aSteadyChurnIsHeldToTheInterval() {
        // An app that presents a new credential every 10 ms for 10 s: 1,000 lanes asked, and
        // none starts sooner than the burst plus one a second allows.
        var pacing = LanePacing(interval: .seconds(1), now: 0)
        var starts: [UInt64] = []
        for i in 0..<1_000 {
            let now = UInt64(i) * 10_000_000
            starts.append(now + pacing.admit(now: now))
        }
        let byTenSeconds = starts.filter { $0 <= 10 * second }.count
        #expect(byTenSeconds <= LanePacing.burst + 10, "\(byTenSeconds) lanes started in 10 s")
        #expect(starts == starts.sorted(), "slots are given in order")
    }

    @Test func immediateReconnectsPaceNothingAndDisabledOnesOneASecond() {
        var immediate = LanePacing(interval: .zero, now: 0)
        for _ in 0..<100 { #expect(immediate.admit(now: 0) == 0) }
        var disabled = LanePacing(interval: nil, now: 0)
        for _ in 0..<LanePacing.burst { #expect(disabled.admit(now: 0) == 0) }
        #expect(disabled.admit(now: 0) == second)
    }
}
