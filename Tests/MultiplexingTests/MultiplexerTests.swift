import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import Multiplexing
import NIOCore
import Testing

/// Clients are named by strings; the tag is a number the tests choose per subscriber.
typealias Mux = Multiplexer<String, Int>
typealias Action = Mux.Action

/// The one operation an `open` action names.
func opened(_ actions: [Action]) -> Mux.OperationID? {
    guard actions.count == 1, case .open(let id, _, _, _, _, _) = actions[0] else { return nil }
    return id
}

func subscriber(_ client: String, _ localID: String, _ tag: Int) -> Mux.Subscriber {
    Mux.Subscriber(client: client, localID: localID, tag: tag)
}

@Suite struct DedupAndReferenceCountTests {
    @Test func identicalSubscriptionsShareOneUpstreamOperation() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        let joined = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "k", tag: 2)
        #expect(joined == [.joined(id, subscriber: subscriber("b", "x", 2), state: .pending, subscribers: 2)])
        #expect(mux.upstreamCount == 1)
        #expect(mux.localCount == 2)
        #expect(mux.subscribers(of: id).map(\.tag) == [1, 2])
        let other = try #require(opened(mux.subscribe(client: "b", localID: "y", kind: .subscription, key: "other", tag: 3)))
        #expect(other != id)
        #expect(mux.upstreamCount == 2)
    }

    @Test func theSameClientMayReadOneSubscriptionUnderTwoIDs() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "k", tag: 2)
        #expect(mux.subscribe(client: "a", localID: "x", kind: .subscription, key: "k", tag: 3).count == 1)
        #expect(mux.complete(client: "a", localID: "1").isEmpty)
        #expect(mux.subscribers(of: id).map(\.localID) == ["2", "x"])
        #expect(mux.operation(of: "a", localID: "2") == id)
        #expect(mux.operation(of: "a", localID: "1") == nil)
    }

    @Test func queriesAndMutationsAreNeverShared() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        for kind in [OperationKind.query, .mutation] {
            let first = try #require(opened(mux.subscribe(client: "a", localID: "\(kind)1", kind: kind, key: "same", tag: 1)))
            let second = try #require(opened(mux.subscribe(client: "b", localID: "\(kind)2", kind: kind, key: "same", tag: 2)))
            #expect(first != second)
        }
        // Nor does a subscription join them under the same key.
        #expect(opened(mux.subscribe(client: "c", localID: "s", kind: .subscription, key: "same", tag: 3)) != nil)
        #expect(mux.upstreamCount == 5)
    }

    @Test func theLastSubscriberToLeaveClosesItUpstreamAndFreesTheKey() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "k", tag: 2)
        #expect(mux.complete(client: "a", localID: "1").isEmpty)
        #expect(mux.complete(client: "a", localID: "1").isEmpty)  // twice: nothing more
        #expect(mux.complete(client: "b", localID: "1") == [.close(id, on: .connection(0))])
        #expect(mux.upstreamCount == 0 && mux.localCount == 0)
        let again = try #require(opened(mux.subscribe(client: "c", localID: "1", kind: .subscription, key: "k", tag: 3)))
        #expect(again != id)
        // Upstream news of the closed operation is ignored.
        #expect(mux.upstreamState(id, .active).isEmpty)
        #expect(mux.upstreamFinished(id, .completed).isEmpty)
        #expect(mux.subscribers(of: id).isEmpty)
    }

    @Test func aClientGoneLeavesEveryOperationItRead() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let shared = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "shared", tag: 1)))
        let own = try #require(opened(mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "own", tag: 2)))
        let query = try #require(opened(mux.subscribe(client: "a", localID: "3", kind: .query, key: nil, tag: 3)))
        _ = mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "shared", tag: 4)
        #expect(mux.clientGone("a") == [.close(own, on: .connection(0)), .close(query, on: .connection(0))])
        #expect(mux.subscribers(of: shared).map(\.client) == ["b"])
        #expect(mux.operationCount(of: "a") == 0)
        #expect(mux.clientGone("a").isEmpty)
    }
}

@Suite struct StatePropagationTests {
    @Test func everySubscriberOfASubscriptionIsToldEachState() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.subscribe(client: "b", localID: "2", kind: .subscription, key: "k", tag: 2)
        #expect(mux.upstreamState(id, .active) == [.tellState(subscriber("a", "1", 1), .active), .tellState(subscriber("b", "2", 2), .active)])
        #expect(mux.state(of: id) == .active)
        #expect(mux.upstreamState(id, .reconnecting).count == 2)
    }

    @Test func aLateJoinerIsToldTheCurrentState() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.upstreamState(id, .active)
        _ = mux.upstreamState(id, .paused)
        #expect(
            mux.subscribe(client: "late", localID: "9", kind: .subscription, key: "k", tag: 9) == [
                .joined(id, subscriber: subscriber("late", "9", 9), state: .paused, subscribers: 2)
            ]
        )
    }

    @Test func aQueryIsNotToldStates() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .query, key: nil, tag: 1)))
        #expect(mux.upstreamState(id, .active).isEmpty)
        #expect(mux.state(of: id) == .active)
    }

    @Test func anUpstreamFinishTellsEverySubscriberAndFreesTheirIDs() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.subscribe(client: "b", localID: "2", kind: .subscription, key: "k", tag: 2)
        let failure = OperationFinish.error(.transport(.connectionLost(reason: "gone")))
        #expect(
            mux.upstreamFinished(id, failure) == [
                .finish(subscriber("a", "1", 1), failure), .finish(subscriber("b", "2", 2), failure), .finished(id, failure, subscribers: 2),
            ]
        )
        #expect(mux.upstreamCount == 0 && mux.localCount == 0)
        // Nothing is closed upstream for it, and the ids may be used again.
        #expect(mux.complete(client: "a", localID: "1").isEmpty)
        #expect(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)) != nil)
    }

    @Test func anUpstreamErrorPayloadIsPassedThroughUntouched() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .query, key: nil, tag: 1)))
        let errors = ByteBuffer(string: #"[{"message":"no"}]"#)
        #expect(mux.upstreamFinished(id, .error(.upstream(errors))).first == .finish(subscriber("a", "1", 1), .error(.upstream(errors))))
    }
}

@Suite struct LimitsAndRefusalTests {
    @Test func aDuplicateLocalIDIsRefusedAndChangesNothing() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        #expect(mux.admission(client: "a", localID: "1") == .duplicateID)
        #expect(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "other", tag: 2) == [.refuse(client: "a", localID: "1", .duplicateID)])
        #expect(mux.upstreamCount == 1 && mux.subscribers(of: id).map(\.tag) == [1])
        // Another client may use the same local id.
        #expect(mux.admission(client: "b", localID: "1") == nil)
    }

    @Test func maxOperationsPerClientCountsSharedAndOwnOperations() throws {
        var mux = Mux(maxOperationsPerClient: 2)
        _ = mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)
        _ = mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "k", tag: 2)
        #expect(
            mux.subscribe(client: "a", localID: "3", kind: .query, key: nil, tag: 3) == [
                .refuse(client: "a", localID: "3", .tooManyOperations(limit: 2))
            ]
        )
        #expect(mux.admission(client: "b", localID: "3") == nil)
        _ = mux.complete(client: "a", localID: "1")
        #expect(mux.admission(client: "a", localID: "3") == nil)
        // A reload lowers the limit: new operations are refused, live ones stay.
        mux.maxOperationsPerClient = 0
        #expect(mux.admission(client: "new", localID: "1") == .tooManyOperations(limit: 0))
        #expect(mux.localCount == 1)
    }

    @Test func aFullUpstreamRefusesTheSubscriberThatAskedAndLeavesNoTrace() throws {
        var mux = Mux(maxOperationsPerClient: 10, layout: UpstreamLayout(maxConnections: 1, maxOperationsPerConnection: 1))
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        #expect(mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "other", tag: 2) == [.refuse(client: "b", localID: "1", .upstreamFull)])
        #expect(mux.upstreamCount == 1 && mux.localCount == 1)
        #expect(mux.operation(of: "b", localID: "1") == nil)
        // A join takes no new place.
        #expect(mux.subscribe(client: "b", localID: "2", kind: .subscription, key: "k", tag: 3).count == 1)
        _ = mux.clientGone("a")
        _ = mux.clientGone("b")
        #expect(mux.subscribers(of: id).isEmpty && mux.load(on: .connection(0)) == 0)
        #expect(opened(mux.subscribe(client: "b", localID: "1", kind: .subscription, key: "other", tag: 2)) != nil)
    }
}

@Suite struct ShutdownTests {
    @Test func shutdownTellsEveryLocalOperationAndRefusesNewOnes() throws {
        var mux = Mux(maxOperationsPerClient: 10)
        let id = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "k", tag: 1)))
        _ = mux.subscribe(client: "b", localID: "2", kind: .subscription, key: "k", tag: 2)
        _ = mux.subscribe(client: "b", localID: "3", kind: .mutation, key: nil, tag: 3)
        #expect(mux.shutDown() == [.shutDown(subscriber("a", "1", 1)), .shutDown(subscriber("b", "2", 2)), .shutDown(subscriber("b", "3", 3))])
        #expect(mux.upstreamCount == 0 && mux.localCount == 0)
        #expect(mux.subscribe(client: "c", localID: "1", kind: .subscription, key: "k", tag: 4) == [.refuse(client: "c", localID: "1", .shuttingDown)])
        // The transports then end their operations: nobody is told twice.
        #expect(mux.upstreamFinished(id, .error(.transport(.shutDown))).isEmpty)
        #expect(mux.clientGone("a").isEmpty)
    }
}

/// Random event sequences against a plain model of who reads what: the registry never loses,
/// duplicates or leaks a subscriber, and exactly the last one out closes an operation.
@Suite struct MultiplexerModelTests {
    @Test(arguments: 1...20) func randomEventsKeepTheRegistryConsistent(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var mux = Mux(maxOperationsPerClient: 4, layout: UpstreamLayout(maxConnections: 3, maxOperationsPerConnection: 2))
        /// Where each live operation was placed, as `open` told it.
        var placed: [Mux.OperationID: Placement] = [:]
        /// (client, localID) → operation, as the actions told it.
        var model: [String: Mux.OperationID] = [:]
        var closed = Set<Mux.OperationID>()
        let clients = ["a", "b", "c", "d"]
        let keys = ["k1", "k2", "k3"]
        func name(_ client: String, _ local: String) -> String { client + "/" + local }
        for _ in 0..<400 {
            let client = clients.randomElement(using: &random)!
            let local = "\(Int.random(in: 0..<5, using: &random))"
            var actions: [Action] = []
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let kind: OperationKind = Int.random(in: 0..<4, using: &random) == 0 ? .query : .subscription
                actions = mux.subscribe(client: client, localID: local, kind: kind, key: DedupKey(keys.randomElement(using: &random)!), tag: 0)
            case 4..<6:
                actions = mux.complete(client: client, localID: local)
                model[name(client, local)] = nil
            case 6:
                actions = mux.clientGone(client)
                model = model.filter { !$0.key.hasPrefix(client + "/") }
            case 7:
                if let id = model.values.randomElement(using: &random) {
                    actions = mux.upstreamState(id, [.active, .reconnecting, .paused].randomElement(using: &random)!)
                }
            case 8:
                if let id = model.values.randomElement(using: &random) { actions = mux.upstreamFinished(id, .completed) }
            default:
                // A reload: the pool's caps change; live operations stay where they are.
                mux.layout.maxOperationsPerConnection = Int.random(in: 1...4, using: &random)
            }
            for action in actions {
                switch action {
                case .open(let id, _, _, let placement, let first, _):
                    #expect(!closed.contains(id))
                    model[name(first.client, first.localID)] = id
                    placed[id] = placement
                case .joined(let id, let joiner, _, _), .resumed(let id, let joiner, _):
                    model[name(joiner.client, joiner.localID)] = id
                case .close(let id, let placement, _):
                    #expect(!model.values.contains(id), "closed while still read")
                    #expect(placed.removeValue(forKey: id) == placement, "closed where it was opened")
                    closed.insert(id)
                case .finish(let reader, _):
                    model[name(reader.client, reader.localID)] = nil
                case .refuse(let client, let local, let refusal):
                    if refusal == .upstreamFull { model[name(client, local)] = nil }
                case .finished(let id, _, _, _):
                    closed.insert(id)
                    placed[id] = nil
                case .tellState, .shutDown, .replay, .snapshot, .deliverHeld:
                    break
                }
            }
            // The registry and the model agree, reader by reader and in totals.
            for (reader, id) in model {
                let parts = reader.split(separator: "/").map(String.init)
                #expect(mux.operation(of: parts[0], localID: parts[1]) == id)
                #expect(mux.subscribers(of: id).contains { $0.client == parts[0] && $0.localID == parts[1] })
            }
            #expect(mux.localCount == model.count)
            #expect(mux.upstreamCount == Set(model.values).count)
            for client in clients { #expect(mux.operationCount(of: client) <= 4) }
            // Placement: the core's load is what it placed, and never past the pool's size.
            #expect(Set(placed.keys) == Set(model.values))
            for index in 0..<3 {
                #expect(mux.load(on: .connection(index)) == placed.values.filter { $0 == .connection(index) }.count)
            }
            #expect(!placed.values.contains { if case .connection(let index) = $0 { index >= 3 } else { true } })
        }
    }
}

/// A server that refuses one more subscription on a connection (AppSync's
/// `MaxSubscriptionsReachedError`): the subscription moves to another connection, the same
/// operation for the same subscribers, and that connection takes no more than it held.
@Suite struct CarrierFullTests {
    @Test func aRefusedSubscriptionOpensOnAnotherConnectionAndTheFullOneTakesNoMore() throws {
        var mux = Mux(maxOperationsPerClient: 10, layout: UpstreamLayout(maxConnections: 3, maxOperationsPerConnection: 0))
        let a = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "a", payload: ByteBuffer(string: "A"), tag: 1)))
        let b = try #require(opened(mux.subscribe(client: "a", localID: "2", kind: .subscription, key: "b", payload: ByteBuffer(string: "B"), tag: 2)))
        _ = mux.subscribe(client: "b", localID: "x", kind: .subscription, key: "b", tag: 3)
        #expect(mux.placement(of: b) == .connection(0))
        // Connection 0's server holds one: `b` is refused there.
        let moved = mux.carrierFull(b)
        #expect(moved == [.open(b, kind: .subscription, payload: ByteBuffer(string: "B"), on: .connection(1), first: subscriber("a", "2", 2))])
        #expect(mux.placement(of: b) == .connection(1))
        #expect(mux.subscribers(of: b).map(\.tag) == [2, 3], "the same subscribers")
        #expect(mux.load(on: .connection(0)) == 1 && mux.load(on: .connection(1)) == 1)
        let c = try #require(opened(mux.subscribe(client: "c", localID: "1", kind: .subscription, key: "c", tag: 4)))
        #expect(mux.placement(of: c) == .connection(1), "connection 0 takes no more than it held")
        // Closing `a` frees room on connection 0 again.
        _ = mux.complete(client: "a", localID: "1")
        let d = try #require(opened(mux.subscribe(client: "d", localID: "1", kind: .subscription, key: "d", tag: 5)))
        #expect(mux.placement(of: d) == .connection(0))
        _ = a
    }

    @Test func whenEveryConnectionIsFullTheSubscriptionEndsWithAnError() throws {
        var mux = Mux(maxOperationsPerClient: 10, layout: UpstreamLayout(maxConnections: 1, maxOperationsPerConnection: 0))
        let a = try #require(opened(mux.subscribe(client: "a", localID: "1", kind: .subscription, key: "a", tag: 1)))
        let actions = mux.carrierFull(a)
        guard case .finish(_, .error(.transport(.connectionLost(let reason)))) = actions.first else {
            Issue.record("expected an error, got \(actions)")
            return
        }
        #expect(reason.contains("full"))
        #expect(mux.upstreamCount == 0 && mux.localCount == 0)
        #expect(mux.load(on: .connection(0)) == 0)
    }
}
