import Testing

@testable import ResultDelivery

/// The switchboard's and the fan-out's shared rule: one event at a time, the others after it, in
/// the order they came.
@Suite struct OneAtATimeTests {
    @Test func anEventThatArrivesDuringAnotherRunsAfterItInOrder() {
        let turn = OneAtATime()
        var log: [String] = []
        var idle = 0
        turn.whenIdle = { idle += 1 }
        turn.run {
            log.append("first begins")
            #expect(turn.isBusy)
            turn.later { log.append("second") }
            turn.later {
                log.append("third")
                // Arriving while the third is handled: after it, still in this turn.
                turn.later { log.append("fourth") }
            }
            log.append("first ends")
        }
        #expect(log == ["first begins", "first ends", "second", "third", "fourth"])
        #expect(!turn.isBusy)
        #expect(idle == 1)
    }

    @Test func aNestedStepRunsAtOnceAndTheIdleCallComesOnceAtTheEnd() {
        let turn = OneAtATime()
        var log: [String] = []
        var idle = 0
        turn.whenIdle = {
            idle += 1
            #expect(!turn.isBusy)
        }
        turn.run {
            turn.run { log.append("nested") }
            log.append("outer")
        }
        turn.run { log.append("next event") }
        #expect(log == ["nested", "outer", "next event"])
        #expect(idle == 2)
    }
}
