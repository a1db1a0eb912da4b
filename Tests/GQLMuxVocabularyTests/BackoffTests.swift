import Testing

@testable import GQLMuxVocabulary

@Suite struct BackoffTests {
    @Test func growsExponentiallyAndCapsAtMaximum() {
        let backoff = Backoff(initial: .seconds(1), maximum: .seconds(30), multiplier: 2, jitter: 0)
        let delays = (1...8).map { backoff.delay(attempt: $0, random: 0.5)!.seconds }
        #expect(delays == [1, 2, 4, 8, 16, 30, 30, 30])
    }

    @Test(arguments: [0.0, 0.25, 0.5, 0.999])
    func jitterStaysWithinTheConfiguredFraction(random: Double) {
        let backoff = Backoff(initial: .seconds(10), maximum: .seconds(30), multiplier: 2, jitter: 0.2)
        let delay = backoff.delay(attempt: 1, random: random)!.seconds
        #expect(delay >= 8 && delay <= 12)
        #expect(abs(delay - (8 + 4 * random)) < 1e-6)
    }

    @Test func zeroInitialRetriesOnceImmediatelyThenGrows() {
        let backoff = Backoff(initial: .zero, maximum: .seconds(30), multiplier: 2, jitter: 0)
        #expect(backoff.delay(attempt: 1, random: 0) == .zero)
        #expect(backoff.delay(attempt: 2, random: 0)!.seconds == 2)
        #expect(backoff.delay(attempt: 3, random: 0)!.seconds == 4)
    }

    @Test func maxAttemptsLimitsRetriesAndZeroIsUnlimited() {
        let limited = Backoff(maxAttempts: 3)
        #expect(limited.delay(attempt: 3, random: 0) != nil)
        #expect(limited.delay(attempt: 4, random: 0) == nil)
        #expect(Backoff(maxAttempts: 0).delay(attempt: 10_000, random: 0) != nil)
    }

    @Test func nilInitialDisablesReconnection() {
        #expect(Backoff(initial: nil).delay(attempt: 1, random: 0) == nil)
    }
}
