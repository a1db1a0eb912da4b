import GQLMuxConfiguration
import GQLMuxVocabulary
import HTTPFields
import LocalProtocol
import NIOCore
import NIOEmbedded
import RequestValidation
import SystemdSupport
import Testing
import Upstream

@testable import GQLMuxDaemon
@testable import ResultDelivery

/// A line client's ``ClientSession`` and the ``Fanout`` behind it on `EmbeddedChannel`s and one
/// embedded loop, with a control plane and an upstream of the test's own: no socket, no
/// server, no timer. What a client writes becomes operations on the upstream side, what the
/// upstream side tells comes back to every subscriber as its own lines, and identical
/// subscriptions share one upstream operation.
@Suite struct ClientSessionTests {
    /// The upstream side as the fan-out sees it: records what it is asked.
    final class Upstream: UpstreamOperations {
        var opened: [(id: OperationID, kind: OperationKind, payload: String, placement: Placement)] = []
        var cancelled: [OperationID] = []
        func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement, lane: LaneID) -> Bool {
            opened.append((id, kind, String(buffer: payload), placement))
            return true
        }
        func cancelOnLoop(_ id: OperationID, on placement: Placement, lane: LaneID) { cancelled.append(id) }
        func carrierName(at placement: Placement, lane: LaneID) -> String? { "test" }
        func upstreamName(of lane: LaneID) -> String? { "default" }
    }

    /// The control plane as a session sees it.
    final class Host: SessionHost {
        var documentLimits = SubscribeRequest.Limits()
        var opened = 0
        var closed = 0
        func connectionAck() -> SessionMessage { .connectionAck(upstreamState: "connected") }
        func statusPayload(wholeURLs: Bool) -> ByteBuffer { ByteBuffer(string: "{}") }
        func metricsText() -> [UInt8] { [] }
        func isAdmin(_ peer: PeerCredentials?) -> Bool { false }
        func pause(upstream: String?) -> LaneRefusal? { nil }
        func resume(upstream: String?) -> LaneRefusal? { nil }
        func reload() -> EventLoopFuture<Void> { fatalError("not asked in these tests") }
        func restart() -> String? { "not here" }
        func sessionOpened(_ session: ClientSession) { opened += 1 }
        func sessionClosed(_ session: ClientSession) { closed += 1 }
        func statusChanged() {}
        var credentialLimit: Int? = 64
        var released: [LaneID] = []
        func releaseLane(_ lane: LaneID) { released.append(lane) }
        var cuts = 0
        func slowConsumerCut(_ session: ClientSession) { cuts += 1 }
        func table(_ table: ClientRequest.Table, for peer: PeerCredentials?) -> ByteBuffer { ByteBuffer(string: "[]") }
        func lane(upstream: String?, for session: ClientSession) -> Result<LaneID, LaneRefusal> {
            upstream == nil ? .success(.primary) : .failure(LaneRefusal(code: .unknownUpstream, message: "no upstream is named '\(upstream!)'"))
        }
    }

    /// An embedded loop, an upstream side and a control plane of the test's own, and a
    /// switchboard on that loop in front of that upstream side.
    private func rig() throws -> (EmbeddedEventLoop, Upstream, Host, Switchboard) {
        let loop = EmbeddedEventLoop()
        let upstream = Upstream()
        return (loop, upstream, Host(), try switchboard(loop, upstream))
    }

    /// A switchboard on `loop` in front of `upstream`.
    private func switchboard(_ loop: EmbeddedEventLoop, _ upstream: Upstream) throws -> Switchboard {
        let configuration = DaemonConfiguration(upstream: UpstreamConfiguration(url: try UpstreamURL("ws://127.0.0.1:1/graphql")))
        let events = DaemonEvents { _, _, _ in }
        let budget = MemoryBudget(limit: configuration.limits.totalBufferBytes, sessions: LiveSessions(), eventLoop: loop, events: events)
        return Switchboard(eventLoop: loop, events: events, metrics: DaemonMetrics(), configuration: configuration, upstream: upstream, budget: budget)
    }

    /// A connected line client's channel with its wire (lines in, requests out) and its session.
    private func client(_ loop: EmbeddedEventLoop, _ switchboard: Switchboard, _ host: Host) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(loop: loop)
        let session = ClientSession(
            host: host,
            switchboard: switchboard,
            events: DaemonEvents { _, _, _ in },
            metrics: switchboard.metrics,
            channel: channel,
            arrival: .init(.lineSocket, output: .lines)
        )
        try channel.pipeline.syncOperations.addHandler(LineWire { [unowned host] in host.documentLimits })
        try channel.pipeline.syncOperations.addHandler(session)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    /// The lines written to `channel` so far.
    private func lines(_ channel: EmbeddedChannel) throws -> [String] {
        var all = ""
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { all += String(buffer: bytes) }
        return all.split(separator: "\n").map(String.init)
    }

    /// `channel` subscribes to `subscription { tick }` as `id`, the upstream side says it is
    /// active, and what the client heard so far is read: the upstream operation it opened.
    private func subscribeActive(
        _ channel: EmbeddedChannel,
        _ id: String,
        _ loop: EmbeddedEventLoop,
        _ upstream: Upstream,
        _ switchboard: Switchboard
    ) throws -> (id: OperationID, kind: OperationKind, payload: String, placement: Placement) {
        try send(channel, #"{"type":"subscribe","id":"\#(id)","payload":{"query":"subscription { tick }"}}"#)
        loop.run()
        let operation = try #require(upstream.opened.last)
        switchboard.upstreamUpdate(operation.id, .state(.active))
        loop.run()
        _ = try lines(channel)
        return operation
    }

    private func send(_ channel: EmbeddedChannel, _ line: String) throws {
        try channel.writeInbound(ByteBuffer(string: line))
    }

    @Test func aCredentialIsKeptOnlyWithinItsLimitAndCountsInTheBudget() throws {
        let (loop, _, host, switchboard) = try rig()
        let channel = try client(loop, switchboard, host)
        let session = try channel.pipeline.syncOperations.handler(type: ClientSession.self)
        let small = PresentedCredential(payload: Array(#"{"token":"alice"}"#.utf8), headers: [HeaderField(name: "authorization", value: "Bearer a")])
        session.present(small)
        #expect(session.presented == small)
        #expect(session.presentedCredentials.refusal == nil)
        #expect(switchboard.budget.credentials == small.byteCount)
        // 65 bytes against a limit of 64: nothing kept, nothing counted, and the reason kept.
        let large = PresentedCredential(payload: Array(("{\"t\":\"" + String(repeating: "x", count: 57) + "\"}").utf8))
        #expect(large.byteCount == 65)
        session.present(large)
        #expect(session.presented.isEmpty)
        #expect(switchboard.budget.credentials == 0)
        #expect(session.presentedCredentials.refusal?.contains("max_credential_bytes (64)") == true)
        // No upstream uses identities: nothing is kept at all.
        host.credentialLimit = nil
        session.present(small)
        #expect(session.presented.isEmpty && session.presentedCredentials.refusal == nil && switchboard.budget.credentials == 0)
        // Leaving gives back what it held.
        host.credentialLimit = 64
        session.present(small)
        try channel.close().wait()
        #expect(switchboard.budget.credentials == 0)
    }

    @Test func aNewCredentialLetsGoOfTheLanesNoOperationOfTheClientUses() throws {
        let (loop, _, host, switchboard) = try rig()
        let channel = try client(loop, switchboard, host)
        let session = try channel.pipeline.syncOperations.handler(type: ClientSession.self)
        session.present(PresentedCredential(payload: Array(#"{"token":"one"}"#.utf8)))
        let first = session.holdLane(LaneID(7), presented: session.presented)
        #expect(first)
        #expect(session.presentedCredentials.presentedForLane[LaneID(7)]?.payload == Array(#"{"token":"one"}"#.utf8))
        session.present(PresentedCredential(payload: Array(#"{"token":"two"}"#.utf8)))
        #expect(host.released == [LaneID(7)])
        #expect(session.presentedCredentials.heldLanes.isEmpty)
        #expect(session.presentedCredentials.presentedForLane.isEmpty, "the credential kept for the lane goes with it")
    }

    @Test func identicalSubscriptionsShareOneUpstreamOperationAndEachClientHearsItsOwnID() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let a = try client(loop, switchboard, host)
        let b = try client(loop, switchboard, host)
        #expect(host.opened == 2)

        try send(a, #"{"type":"connection_init"}"#)
        #expect(try lines(a) == [#"{"type":"connection_ack","payload":{"protocol":1,"server":"gqlmuxd/\#(LocalProtocol.release)","upstream":"connected"}}"#])
        try send(a, #"{"type":"subscribe","id":"one","payload":{"query":"subscription { tick }"}}"#)
        try send(b, #"{"type":"subscribe","id":"two","payload":{"query":"subscription  { tick }"}}"#)
        loop.run()
        #expect(upstream.opened.count == 1, "deduplicated: \(upstream.opened.map(\.payload))")
        let operation = try #require(upstream.opened.first)
        #expect(operation.kind == .subscription)
        #expect(operation.placement == .connection(0))

        switchboard.upstreamUpdate(operation.id, .state(.active))
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":1}}"#)))
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":2}}"#)))
        loop.run()  // the end of the turn: the run is written and flushed
        let heardA = try lines(a)
        let heardB = try lines(b)
        #expect(heardA.filter { $0.contains(#""type":"next""#) }.count == 2)
        #expect(heardA.contains(#"{"type":"next","id":"one","payload":{"data":{"tick":2}}}"#), "\(heardA)")
        #expect(heardB.contains(#"{"type":"next","id":"two","payload":{"data":{"tick":1}}}"#), "\(heardB)")
        #expect(heardB.contains(#"{"type":"state","id":"two","state":"active"}"#), "\(heardB)")

        // The first to leave keeps the operation; the last cancels it upstream.
        try send(a, #"{"type":"complete","id":"one"}"#)
        loop.run()
        #expect(upstream.cancelled.isEmpty)
        try b.close().wait()
        loop.run()
        #expect(upstream.cancelled == [operation.id])
        #expect(host.closed == 1)
        #expect(switchboard.localCount == 0 && switchboard.upstreamCount == 0)
    }

    /// Questions asked of the core write nothing: a result batched this turn stays batched
    /// while status, metrics, admission and a restart's questions are asked; a change writes it
    /// first, and so do a shut-down's last words, which come after it.
    @Test func questionsWriteNothingAndChangesWriteThePendingRunFirst() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let a = try client(loop, switchboard, host)
        let session = try a.pipeline.syncOperations.handler(type: ClientSession.self)
        let operation = try subscribeActive(a, "one", loop, upstream, switchboard)
        let before = switchboard.messagesOut

        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":1}}"#)))
        _ = switchboard.countsByLane(single: nil)
        #expect(switchboard.admission(session: session, localID: "one") != nil, "a duplicate id")
        #expect(switchboard.admission(session: session, localID: "two") == nil)
        #expect(switchboard.subscriptions(of: session).count == 1)
        #expect(switchboard.lanes(of: session) == [.primary])
        #expect(switchboard.openOperations(of: session) == ["one"])
        #expect(!switchboard.awaitsAnswer(session))
        _ = switchboard.operationRows()
        #expect(switchboard.messagesOut == before, "a question wrote the pending run")

        // A change (another subscription) writes the run before it changes the core.
        try send(a, #"{"type":"subscribe","id":"two","payload":{"query":"subscription { other }"}}"#)
        #expect(switchboard.messagesOut == before + 1)
        loop.run()
        #expect(try lines(a).first == #"{"type":"next","id":"one","payload":{"data":{"tick":1}}}"#)

        // An answer to a request (here a refusal of a document that does not parse) comes
        // after the result batched before the request.
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":3}}"#)))
        try send(a, #"{"type":"subscribe","id":"bad","payload":{"query":"subscription {"}}"#)
        loop.run()
        let answered = try lines(a)
        #expect(answered.first == #"{"type":"next","id":"one","payload":{"data":{"tick":3}}}"#, "\(answered)")
        #expect(answered.last?.contains(#""id":"bad""#) == true, "\(answered)")

        // A shut-down's last words come after the result batched before them.
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":2}}"#)))
        session.shutDown()
        loop.run()
        let heard = try lines(a)
        let result = try #require(heard.firstIndex(of: #"{"type":"next","id":"one","payload":{"data":{"tick":2}}}"#), "\(heard)")
        let last = try #require(heard.firstIndex { $0.contains("SHUTTING_DOWN") }, "\(heard)")
        #expect(result < last, "\(heard)")
    }

    /// A result is written when the upstream read that brought it ends, not at the end of the
    /// loop's turn: nothing is written before (the read's other results would join it), all of
    /// it at once after; an end told while another event is handled leaves the run for the end
    /// of the turn.
    @Test func aReadsResultsAreWrittenWhenTheReadEnds() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let a = try client(loop, switchboard, host)
        let operation = try subscribeActive(a, "one", loop, upstream, switchboard)

        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":1}}"#)))
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":2}}"#)))
        #expect(try a.readOutbound(as: ByteBuffer.self) == nil, "written before the read ended")
        switchboard.upstreamReadEnded()  // the turn has not ended: no loop.run()
        let written = try #require(try a.readOutbound(as: ByteBuffer.self))
        #expect(
            String(buffer: written)
                == #"{"type":"next","id":"one","payload":{"data":{"tick":1}}}"# + "\n" + #"{"type":"next","id":"one","payload":{"data":{"tick":2}}}"# + "\n"
        )
        #expect(try a.readOutbound(as: ByteBuffer.self) == nil, "one write for the read")
        loop.run()  // the turn's own flush finds nothing left
        #expect(try a.readOutbound(as: ByteBuffer.self) == nil)

        // Told while an event is handled (a read our own write caused mid-step), the end is
        // left to the turn.
        switchboard.upstreamUpdate(operation.id, .next(ByteBuffer(string: #"{"data":{"tick":3}}"#)))
        switchboard.fanout.serially { switchboard.upstreamReadEnded() }
        #expect(try a.readOutbound(as: ByteBuffer.self) == nil, "written inside another event")
        loop.run()
        #expect(try lines(a) == [#"{"type":"next","id":"one","payload":{"data":{"tick":3}}}"#])
    }

    /// Results of two subscriptions that interleave make runs of one result each, cut off
    /// mid-turn: they are batched into the client's one write of the turn (a shared frame
    /// flushed per run would be a write per result), in the upstream's order.
    @Test func interleavedResultsReachTheClientInOneWritePerTurn() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let a = try client(loop, switchboard, host)
        try send(a, #"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick(n: 1) }"}}"#)
        try send(a, #"{"type":"subscribe","id":"y","payload":{"query":"subscription { tick(n: 2) }"}}"#)
        loop.run()
        #expect(upstream.opened.count == 2)
        let (x, y) = (upstream.opened[0].id, upstream.opened[1].id)
        switchboard.upstreamUpdate(x, .state(.active))
        switchboard.upstreamUpdate(y, .state(.active))
        loop.run()
        _ = try lines(a)
        for tick in 1...10 {
            switchboard.upstreamUpdate(x, .next(ByteBuffer(string: #"{"data":{"tick":\#(tick)}}"#)))
            switchboard.upstreamUpdate(y, .next(ByteBuffer(string: #"{"data":{"tick":\#(tick)}}"#)))
        }
        loop.run()  // the end of the turn
        var writes: [String] = []
        while let bytes = try a.readOutbound(as: ByteBuffer.self) { writes.append(String(buffer: bytes)) }
        #expect(writes.count <= 2, "\(writes.count) writes for one turn")
        let heard = writes.joined().split(separator: "\n").map(String.init)
        let expected = (1...10).flatMap { tick in
            ["x", "y"].map { #"{"type":"next","id":"\#($0)","payload":{"data":{"tick":\#(tick)}}}"# }
        }
        #expect(heard == expected)
    }

    /// A request that does not parse is answered with an error for that operation and the
    /// client goes on; a line that breaks the protocol is answered and its connection closed.
    /// Neither reaches the upstream side or the other client.
    @Test func badInputIsAnsweredToItsSenderAloneAndNothingGoesUpstream() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let bad = try client(loop, switchboard, host)
        let good = try client(loop, switchboard, host)
        try send(bad, #"{"type":"subscribe","id":"x","payload":{"query":"subscription { "}}"#)
        loop.run()
        let refused = try lines(bad)
        #expect(refused.count == 1 && refused[0].contains(#""type":"error","id":"x""#), "\(refused)")
        #expect(bad.isActive, "a bad request is an error, not a close")
        try send(bad, #"{"type":"nonsense"}"#)
        loop.run()
        let broken = try lines(bad)
        #expect(broken.count == 1 && broken[0].contains(#""type":"error""#), "\(broken)")
        #expect(!bad.isActive, "a protocol error closes its connection")
        #expect(try lines(good).isEmpty)
        #expect(good.isActive)
        #expect(upstream.opened.isEmpty)
        #expect(host.closed == 1)
    }

    @Test func anUpstreamCompleteFinishesTheOperationForEverySubscriber() throws {
        let (loop, upstream, host, switchboard) = try rig()
        let a = try client(loop, switchboard, host)
        let b = try client(loop, switchboard, host)
        try send(a, #"{"type":"subscribe","id":"a","payload":{"query":"subscription { tick }"}}"#)
        try send(b, #"{"type":"subscribe","id":"b","payload":{"query":"subscription { tick }"}}"#)
        loop.run()
        let operation = try #require(upstream.opened.first)
        switchboard.upstreamUpdate(operation.id, .finished(.completed))
        loop.run()
        #expect(try lines(a).contains(#"{"type":"complete","id":"a"}"#))
        #expect(try lines(b).contains(#"{"type":"complete","id":"b"}"#))
        #expect(switchboard.localCount == 0)
    }
}
