import GQLMuxVocabulary
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import Upstream

/// The transport's one wake-up, on an embedded loop's clock: a later deadline keeps the pending
/// wake-up (it fires early, and the owner sets the next); an earlier one replaces it.
@Suite struct DeadlineTimerTests {
    /// A transport's use of the timer: each wake-up records the time, then sets the deadline the
    /// owner wants now, as `rescheduleTimer` does after the machine's tick.
    /// `@unchecked Sendable` — safe because it is used on the embedded loop's thread only (the
    /// test's own), which `set` checks with `preconditionInEventLoop`.
    final class Owner: @unchecked Sendable {
        let loop = EmbeddedEventLoop()
        var timer = DeadlineTimer()
        var wanted: Instant?
        var wakeUps: [Int64] = []

        func set(_ deadline: Instant?) {
            loop.preconditionInEventLoop()
            wanted = deadline
            guard timer.wouldChange(for: deadline) else { return }  // as the transport asks first
            timer.set(deadline, on: loop) {
                self.timer.fired()
                self.wakeUps.append(Int64(self.loop.now.uptimeNanoseconds))
                let due = self.wanted.map { $0.nanoseconds <= Int64(self.loop.now.uptimeNanoseconds) } ?? false
                self.set(due ? nil : self.wanted)
            }
        }
    }

    @Test func aLaterDeadlineKeepsThePendingWakeUpWhichThenSetsTheNext() {
        let owner = Owner()
        let start = Int64(owner.loop.now.uptimeNanoseconds)
        func ms(_ value: Int64) -> Instant { Instant(nanoseconds: start + value * 1_000_000) }
        owner.set(ms(100))
        // Every message moves the deadline later: no new wake-up is scheduled for them.
        for later in stride(from: Int64(110), through: 300, by: 10) { owner.set(ms(later)) }
        owner.loop.advanceTime(by: .milliseconds(99))
        #expect(owner.wakeUps.isEmpty)
        owner.loop.advanceTime(by: .milliseconds(1))
        #expect(owner.wakeUps == [start + 100_000_000], "the early wake-up ran at the first deadline")
        owner.loop.advanceTime(by: .milliseconds(199))
        #expect(owner.wakeUps.count == 1)
        owner.loop.advanceTime(by: .milliseconds(1))
        #expect(owner.wakeUps == [start + 100_000_000, start + 300_000_000], "then once at the deadline wanted")
        owner.loop.advanceTime(by: .seconds(10))
        #expect(owner.wakeUps.count == 2, "nothing more once nothing is wanted")
    }

    @Test func anEarlierDeadlineReplacesThePendingWakeUpAndNilCancelsIt() {
        let owner = Owner()
        let start = Int64(owner.loop.now.uptimeNanoseconds)
        func ms(_ value: Int64) -> Instant { Instant(nanoseconds: start + value * 1_000_000) }
        owner.set(ms(500))
        owner.set(ms(50))
        owner.loop.advanceTime(by: .milliseconds(50))
        #expect(owner.wakeUps == [start + 50_000_000])
        owner.set(ms(400))
        owner.set(nil)
        owner.loop.advanceTime(by: .seconds(1))
        #expect(owner.wakeUps == [start + 50_000_000], "a cancelled wake-up does not run")
    }
}
