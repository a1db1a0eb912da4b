import GQLMuxVocabulary
import Multiplexing
import NIOCore
import Testing

/// Late joiners and gaps on a manual clock: the latest result kept while someone asked for
/// replays and the stream is active, forgotten when it goes down; the time it was down told
/// with the `active` that ends the gap.
@Suite struct ReplayAndGapTests {
    private func at(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }
    private let result = ByteBuffer(string: #"{"data":{"price":42}}"#)

    /// An active subscription with one subscriber that asked for replays and one result.
    private func activeWithResult(firstAsks: Bool = true) throws -> (Mux, Mux.OperationID) {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1, replay: firstAsks)))
        _ = mux.upstreamState(id, .active, now: at(0))
        mux.remember(id, result, budget: 1 << 20)
        return (mux, id)
    }

    @Test func aJoinerThatAskedGetsTheLatestResultRightAfterItsState() throws {
        var (mux, id) = try activeWithResult()
        let joiner = Mux.Subscriber(client: "b", localID: "x", tag: 2)
        let actions = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: true)
        #expect(actions == [.joined(id, subscriber: joiner, state: .active, subscribers: 2), .replay(joiner, result)])
        #expect(mux.retainedBytes == result.readableBytes)
    }

    @Test func aJoinerThatDidNotAskWaitsForTheNextRealResult() throws {
        var (mux, id) = try activeWithResult()
        let actions = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: false)
        #expect(actions == [.joined(id, subscriber: subscriber("b", "x", 2), state: .active, subscribers: 2)])
    }

    @Test func theLatestResultIsKeptWhoeverSubscribedFirst() throws {
        var (mux, id) = try activeWithResult(firstAsks: false)
        #expect(mux.keepsLast(id))
        #expect(mux.retainedBytes == result.readableBytes)
        let joiner = Mux.Subscriber(client: "b", localID: "x", tag: 2)
        let actions = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: true)
        #expect(actions.last == .replay(joiner, result), "the first subscriber need not have asked")
    }

    @Test func aKeptResultIsACopyNotASliceOfTheReadBuffer() throws {
        var (mux, id) = try activeWithResult()
        var read = ByteBuffer(repeating: UInt8(ascii: "x"), count: 65_536)
        read.setString(#"{"data":1}"#, at: 0)
        mux.remember(id, read.getSlice(at: 0, length: 10)!, budget: 1 << 20)
        let actions = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: true)
        guard case .replay(_, let kept)? = actions.last else {
            Issue.record("no replay: \(actions)")
            return
        }
        #expect(String(buffer: kept) == #"{"data":1}"#)
        #expect(kept.capacity < 65_536, "the 64 KiB read buffer is not pinned by a 10-byte result")
    }

    @Test func aStreamThatGoesDownForgetsItsLatestResultUntilAFreshOne() throws {
        var (mux, id) = try activeWithResult()
        _ = mux.upstreamState(id, .reconnecting, now: at(1_000))
        #expect(mux.retainedBytes == 0)
        #expect(!mux.keepsLast(id), "no result is kept while the stream is down")
        _ = mux.upstreamState(id, .active, now: at(3_500))
        let joined = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: true)
        #expect(joined.count == 1, "the stale result is not replayed")
        mux.remember(id, ByteBuffer(string: #"{"data":{"price":43}}"#), budget: 1 << 20)
        let third = mux.subscribe(client: "c", localID: "y", kind: .subscription, key: "k", tag: 3, replay: true)
        #expect(third.last == .replay(Mux.Subscriber(client: "c", localID: "y", tag: 3), ByteBuffer(string: #"{"data":{"price":43}}"#)))
    }

    @Test func theLastSubscriberLeavingOrTheBudgetForgetsTheResult() throws {
        var (mux, id) = try activeWithResult()
        #expect(mux.forgetLastResults() == result.readableBytes)
        #expect(mux.retainedBytes == 0)
        mux.remember(id, result, budget: 1 << 20)
        _ = mux.complete(client: "a", localID: "1")
        #expect(mux.retainedBytes == 0)
        #expect(!mux.keepsLast(id))
    }

    @Test func aResultOverTheBudgetIsNotKeptAndTheOldOneIsForgotten() throws {
        var (mux, id) = try activeWithResult()
        mux.remember(id, ByteBuffer(repeating: UInt8(ascii: "x"), count: 100), budget: 99)
        #expect(mux.retainedBytes == 0)
        let joined = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, replay: true)
        #expect(joined.count == 1)
    }

    @Test func queriesAndMutationsNeverReplay() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .query, key: "k", tag: 1, replay: true)))
        _ = mux.upstreamState(id, .active, now: at(0))
        #expect(!mux.keepsLast(id))
    }

    @Test func theActiveThatEndsAnOutageCarriesHowLongTheStreamWasDown() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        let first = mux.upstreamState(id, .active, now: at(100))
        #expect(first == [.tellState(subscriber("a", "1", 1), .active)], "the first active ends no gap")
        _ = mux.upstreamState(id, .reconnecting, now: at(1_000))
        _ = mux.upstreamState(id, .pending, now: at(1_200))  // still down: the gap runs from the first loss
        let back = mux.upstreamState(id, .active, now: at(2_750))
        #expect(back == [.tellState(subscriber("a", "1", 1), .active, gap: .milliseconds(1_750))])
        _ = mux.upstreamState(id, .paused, now: at(5_000))
        #expect(mux.upstreamState(id, .active, now: at(5_010)) == [.tellState(subscriber("a", "1", 1), .active, gap: .milliseconds(10))])
    }
}
