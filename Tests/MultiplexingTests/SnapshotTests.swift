import GQLMuxVocabulary
import Multiplexing
import NIOCore
import Testing

/// `resnapshot` on a manual clock: a query run once per resume of a shared stream, its result
/// first to every subscriber that named it, the stream's results held for them meanwhile.
@Suite struct SnapshotTests {
    private func at(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }
    private let snapshot = ByteBuffer(string: #"{"query":"{ price }"}"#)
    private let other = ByteBuffer(string: #"{"query":"{ price volume }"}"#)

    /// A stream with subscribers a (snapshot), b (none), c (the same snapshot), d (another).
    private func stream() throws -> (Mux, Mux.OperationID) {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1, snapshot: snapshot)))
        _ = mux.subscribe(client: "b", localID: "2", kind: .subscription, key: "k", tag: 2)
        _ = mux.subscribe(client: "c", localID: "3", kind: .subscription, key: "k", tag: 3, snapshot: snapshot)
        _ = mux.subscribe(client: "d", localID: "4", kind: .subscription, key: "k", tag: 4, snapshot: other)
        _ = mux.upstreamState(id, .active, now: at(0))
        return (mux, id)
    }

    private func opens(_ actions: [Action]) -> [(Mux.OperationID, ByteBuffer)] {
        actions.compactMap { if case .open(let id, .query, let payload, _, _, _) = $0 { (id, payload) } else { nil } }
    }

    @Test func theFirstActiveRunsNoSnapshotAResumeRunsEachDistinctQueryOnce() throws {
        var (mux, id) = try stream()
        #expect(!mux.isHolding(id), "no snapshot before the first gap")
        _ = mux.upstreamState(id, .reconnecting, now: at(100))
        let resumed = mux.upstreamState(id, .active, now: at(900))
        #expect(resumed.prefix(4).allSatisfy { if case .tellState(_, .active, gap: .milliseconds(800)) = $0 { true } else { false } })
        let queries = opens(resumed)
        #expect(queries.map(\.1) == [snapshot, other], "one query per distinct document, not per subscriber")
        #expect(queries.allSatisfy { mux.isSnapshot($0.0) })
        #expect(mux.waiting(on: id) == [.init(client: "a", localID: "1"), .init(client: "c", localID: "3"), .init(client: "d", localID: "4")])
    }

    @Test func resultsAreHeldForTheWaitingAndTheSnapshotComesFirst() throws {
        var (mux, id) = try stream()
        _ = mux.upstreamState(id, .reconnecting, now: at(100))
        let queries = opens(mux.upstreamState(id, .active, now: at(900)))
        let tick = ByteBuffer(string: #"{"data":{"tick":7}}"#)
        #expect(mux.hold(id, tick).isEmpty)
        let answer = ByteBuffer(string: #"{"data":{"price":42}}"#)
        let actions = mux.snapshotAnswered(queries[0].0, answer)
        #expect(
            actions == [
                .snapshot(subscriber("a", "1", 1), answer), .snapshot(subscriber("c", "3", 3), answer),
                .deliverHeld(subscriber("a", "1", 1), tick), .deliverHeld(subscriber("c", "3", 3), tick),
            ]
        )
        #expect(mux.waiting(on: id) == [.init(client: "d", localID: "4")], "d waits for its own query")
        #expect(mux.snapshotAnswered(queries[0].0, answer).isEmpty, "a query has one answer")
        // d's query fails: d gets what was held, without a snapshot.
        let failed = mux.upstreamFinished(queries[1].0, .error(.transport(.connectionLost(reason: "timeout"))))
        #expect(failed.first == .deliverHeld(subscriber("d", "4", 4), tick))
        #expect(!mux.isHolding(id))
    }

    @Test func aWaitingSubscriberThatLeavesIsNoLongerWaitedFor() throws {
        var (mux, id) = try stream()
        _ = mux.upstreamState(id, .paused, now: at(100))
        _ = mux.upstreamState(id, .active, now: at(200))
        _ = mux.complete(client: "a", localID: "1")
        _ = mux.clientGone("c")
        _ = mux.complete(client: "d", localID: "4")
        #expect(!mux.isHolding(id))
        _ = mux.upstreamState(id, .reconnecting, now: at(300))
        #expect(opens(mux.upstreamState(id, .active, now: at(400))).isEmpty, "nobody names a snapshot any more")
    }

    @Test func heldBytesAreBoundedToo() throws {
        var (mux, id) = try stream()
        _ = mux.upstreamState(id, .reconnecting, now: at(100))
        _ = mux.upstreamState(id, .active, now: at(200))
        let big = ByteBuffer(repeating: UInt8(ascii: "x"), count: Mux.maxHeldBytes / 2)
        #expect(mux.hold(id, big).isEmpty)
        #expect(mux.hold(id, big).count == 6, "past maxHeldBytes, three waiting subscribers get both held results")
        #expect(!mux.isHolding(id))
    }

    @Test func heldResultsAreBoundedThenGivenAtOnce() throws {
        var (mux, id) = try stream()
        _ = mux.upstreamState(id, .reconnecting, now: at(100))
        _ = mux.upstreamState(id, .active, now: at(200))
        var released: [Action] = []
        for n in 0..<Mux.maxHeldResults { released += mux.hold(id, ByteBuffer(string: "\(n)")) }
        #expect(released.count == 3 * Mux.maxHeldResults, "three waiting subscribers get every held result")
        #expect(!mux.isHolding(id))
    }
}
