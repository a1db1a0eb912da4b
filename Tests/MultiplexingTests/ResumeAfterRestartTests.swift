import GQLMuxVocabulary
import Multiplexing
import NIOCore
import Testing

/// Subscriptions carried over a restart, on a manual clock: the next process opens them again
/// as resuming (their clients were told `reconnecting` by the previous one), tells nobody
/// `pending`, and ends the gap with one `active` that says how long since the handover.
@Suite struct ResumeAfterRestartTests {
    private func at(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }

    @Test func aResumedSubscriptionIsToldOnlyItsActiveWithTheGapSinceTheHandover() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let first = mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", payload: ByteBuffer(string: "p"), tag: 1, resumingSince: at(100))
        let id = try #require(opened(first))
        #expect(mux.upstreamState(id, .pending, now: at(150)).isEmpty, "pending is not told to a resumed subscriber")
        let actions = mux.upstreamState(id, .active, now: at(400))
        #expect(actions == [.tellState(subscriber("a", "1", 1), .active, gap: .milliseconds(300))])
        let later = mux.upstreamState(id, .pending, now: at(500))
        #expect(later == [.tellState(subscriber("a", "1", 1), .pending)], "once active, it is an ordinary subscription again")
    }

    @Test func aSecondResumedSubscriberJoinsSilentlyAndHearsTheSameActive() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1, resumingSince: at(100))))
        let joined = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, resumingSince: at(100))
        #expect(joined == [.resumed(id, subscriber: subscriber("b", "x", 2), subscribers: 2)])
        let actions = mux.upstreamState(id, .active, now: at(250))
        #expect(
            actions == [
                .tellState(subscriber("a", "1", 1), .active, gap: .milliseconds(150)),
                .tellState(subscriber("b", "x", 2), .active, gap: .milliseconds(150)),
            ]
        )
    }

    @Test func aResumedSubscriberJoiningAStreamThatIsBackHearsActiveWithItsGapAtOnce() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1, resumingSince: at(100))))
        _ = mux.upstreamState(id, .active, now: at(200))
        let joined = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2, resumingSince: at(100), now: at(260))
        #expect(
            joined == [
                .resumed(id, subscriber: subscriber("b", "x", 2), subscribers: 2),
                .tellState(subscriber("b", "x", 2), .active, gap: .milliseconds(160)),
            ]
        )
    }

    @Test func aNewClientJoiningAResumingStreamIsToldPendingAsUsual() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1, resumingSince: at(0))))
        let joined = mux.subscribe(client: "c", localID: "n", kind: .subscription, key: "k", tag: 3)
        #expect(joined == [.joined(id, subscriber: subscriber("c", "n", 3), state: .pending, subscribers: 2)])
    }

    @Test func aHandoverCarriesEachSubscriptionWithItsPayloadAndSnapshotButNoQuery() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let payload = ByteBuffer(string: #"{"query":"subscription { tick }"}"#)
        let snapshot = ByteBuffer(string: #"{"query":"{ now }"}"#)
        _ = mux.subscribe(client: "a", localID: "s2", kind: .subscription, key: "k", payload: payload, tag: 1, snapshot: snapshot)
        _ = mux.subscribe(client: "a", localID: "s1", kind: .subscription, key: "j", payload: payload, tag: 1)
        _ = mux.subscribe(client: "a", localID: "q", kind: .query, key: nil, payload: ByteBuffer(string: "{}"), tag: 1)
        #expect(
            mux.subscriptions(of: "a") == [
                .init(localID: "s1", payload: payload, snapshot: nil),
                .init(localID: "s2", payload: payload, snapshot: snapshot),
            ]
        )
        #expect(mux.hasSingleOperation("a"))
        #expect(!mux.hasSingleOperation("b"))
        #expect(mux.subscriptions(of: "b").isEmpty)
    }
}
