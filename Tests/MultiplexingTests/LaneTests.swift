import GQLMuxVocabulary
import Multiplexing
import NIOCore
import Testing

/// Lanes: one upstream with one identity's credentials each. Operations of different lanes
/// never share a dedup key, a connection or a replayed result; each lane is placed by its own
/// layout; ending a lane ends its operations only.
@Suite struct LaneTests {
    let other = LaneID(1)
    let third = LaneID(2)

    private func mux() -> Mux {
        var mux = Mux(maxOperationsPerClient: 10, layout: UpstreamLayout(maxConnections: 2, maxOperationsPerConnection: 1))
        mux.setLayout(UpstreamLayout(maxConnections: 1, maxOperationsPerConnection: 0), of: other)
        mux.setLayout(UpstreamLayout(subscriptions: .streams(max: 1), singlesOverHTTP: true), of: third)
        return mux
    }

    @Test func theSameSubscriptionOnTwoLanesIsTwoUpstreamOperations() throws {
        var mux = mux()
        let first = mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)
        let second = mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "k", tag: 2, lane: other)
        guard case .open(let a, _, _, _, _, let laneA) = first.first, case .open(let b, _, _, _, _, let laneB) = second.first else {
            Issue.record("both open: \(first) \(second)")
            return
        }
        #expect(a != b)
        #expect(laneA == .primary)
        #expect(laneB == other)
        // Within a lane the key still dedups.
        let joined = mux.subscribe(client: "c", localID: "1", kind: .subscription, key: "k", tag: 3, lane: other)
        #expect(joined == [.joined(b, subscriber: subscriber("c", "1", 3), state: .pending, subscribers: 2)])
        #expect(mux.operationCount(on: other) == 1)
        #expect(mux.countsByLane[other]?.local == 2)
        #expect(mux.countsByLane[other]?.upstream == 1)
        #expect(mux.countsByLane[.primary]?.upstream == 1)
        #expect(mux.lane(of: b) == other)
    }

    @Test func aReplayNeverCrossesALane() throws {
        var mux = mux()
        let a = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.upstreamState(a, .active)
        mux.remember(a, ByteBuffer(string: "secret of lane 0"), budget: 1 << 20)
        let joined = mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "k", tag: 2, replay: true, lane: other)
        #expect(opened(joined) != nil, "a new operation on the other lane, no replay: \(joined)")
        #expect(!joined.contains { if case .replay = $0 { true } else { false } })
    }

    @Test func eachLaneIsPlacedByItsOwnLayout() throws {
        var mux = mux()
        // primary: 2 connections × 1 operation.
        #expect(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "1", tag: 1).first.map(placement) == .connection(0))
        #expect(mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "2", tag: 1).first.map(placement) == .connection(1))
        #expect(mux.subscribe(client: "a", localID: "3", kind: .subscription, key: "3", tag: 1) == [.refuse(client: "a", localID: "3", .upstreamFull)])
        // other: one connection, no cap; unaffected by primary being full.
        for index in 0..<5 {
            #expect(
                mux.subscribe(client: "b", localID: "\(index)", kind: .subscription, key: DedupKey("\(index)"), tag: 2, lane: other).first.map(placement)
                    == .connection(0)
            )
        }
        // third: one stream, queries over HTTP.
        #expect(mux.subscribe(client: "c", localID: "s", kind: .subscription, key: "s", tag: 3, lane: third).first.map(placement) == .stream)
        #expect(mux.subscribe(client: "c", localID: "q", kind: .query, key: nil, tag: 3, lane: third).first.map(placement) == .http)
        #expect(
            mux.subscribe(client: "c", localID: "t", kind: .subscription, key: "t", tag: 3, lane: third) == [.refuse(client: "c", localID: "t", .upstreamFull)]
        )
        // A lane with no layout takes nothing.
        #expect(
            mux.subscribe(client: "d", localID: "x", kind: .subscription, key: "x", tag: 4, lane: LaneID(9)) == [
                .refuse(client: "d", localID: "x", .upstreamFull)
            ]
        )
    }

    @Test func endingALaneEndsItsOperationsOnlyAndClosesIt() throws {
        var mux = mux()
        let kept = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        let gone = try #require(opened(mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "k", tag: 1, lane: other)))
        _ = mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "k", tag: 2, lane: other)
        let failure = TransportFailure.upstreamRemoved(name: "other")
        let actions = mux.endLane(other, failure)
        #expect(
            actions == [
                .finish(subscriber("a", "2", 1), .error(.transport(failure))), .finish(subscriber("b", "1", 2), .error(.transport(failure))),
                .finished(gone, .error(.transport(failure)), subscribers: 2, lane: other),
            ]
        )
        #expect(mux.state(of: kept) == .pending)
        #expect(mux.operation(of: "a", localID: "1") == kept)
        #expect(mux.operation(of: "a", localID: "2") == nil, "the local id is free again")
        #expect(
            mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "k", tag: 1, lane: other) == [.refuse(client: "a", localID: "2", .upstreamFull)]
        )
    }

    @Test func aClientsLimitAndIdsSpanEveryLane() throws {
        var mux = Mux(maxOperationsPerClient: 2)
        mux.setLayout(UpstreamLayout(), of: other)
        _ = mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)
        #expect(
            mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "j", tag: 1, lane: other) == [.refuse(client: "a", localID: "1", .duplicateID)]
        )
        _ = mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "j", tag: 1, lane: other)
        #expect(
            mux.subscribe(client: "a", localID: "3", kind: .subscription, key: "i", tag: 1, lane: other) == [
                .refuse(client: "a", localID: "3", .tooManyOperations(limit: 2))
            ]
        )
        // A client gone leaves every lane.
        let actions = mux.clientGone("a")
        #expect(actions.count == 2)
        #expect(actions.allSatisfy { if case .close = $0 { true } else { false } })
        #expect(mux.operationCount(on: other) == 0)
    }

    private func placement(_ action: Mux.Action) -> Placement? {
        if case .open(_, _, _, let placement, _, _) = action { placement } else { nil }
    }
}
