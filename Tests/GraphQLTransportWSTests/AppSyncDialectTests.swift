import GQLMuxVocabulary
import NIOCore
import Synchronization
import Testing

@testable import GraphQLTransportWS

/// AWS AppSync's real-time dialect on the shared state machine, on a manual clock: its words on
/// the wire (each `start` carrying the request as a JSON string and the connection's
/// authorization), `start_ack`, errors with and without an id, `connection_error` as a refusal,
/// and the ack's `connectionTimeoutMs` as the limit of silence.
@Suite struct AppSyncDialectTests {
    private let authorization = ByteBuffer(string: #"{"host":"example.appsync-api.eu-west-1.amazonaws.com","x-api-key":"da2-key"}"#)

    private func connected(timeoutMs: Int? = 300_000) -> (Harness, String) {
        var h = Harness { $0.dialect = .appSync }
        h.start()
        let id = h.subscribe()
        h.record(
            h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, protocol: .legacyWS, authorizer: { _ in authorization }, now: h.now)
        )
        h.receive(timeoutMs.map { #"{"type":"connection_ack","payload":{"connectionTimeoutMs":\#($0)}}"# } ?? #"{"type":"connection_ack"}"#)
        return (h, id)
    }

    @Test func itsWordsOnTheWire() {
        let (h, id) = connected()
        #expect(
            h.log.sentTexts == [
                #"{"type":"connection_init"}"#,
                #"{"id":"1","type":"start","payload":{"data":"{\"query\":\"subscription { tick }\"}","extensions":{"authorization":{"host":"example.appsync-api.eu-west-1.amazonaws.com","x-api-key":"da2-key"}}}}"#,
            ]
        )
        var h2 = h
        #expect(h2.receive(#"{"type":"start_ack","id":"1"}"#).isEmpty)
        let data = h2.receive(#"{"type":"data","id":"1","payload":{"data":{"onTick":{"n":1}}}}"#)
        #expect(data.updates(id) == [.next(ByteBuffer(string: #"{"data":{"onTick":{"n":1}}}"#))])
        #expect(h2.record(h2.machine.complete(id: id, now: h2.now)).sentTexts == [#"{"type":"stop","id":"1"}"#])
        h2.receive(#"{"type":"complete","id":"1"}"#)
        #expect(h2.machine.operationCount == 0)
    }

    @Test func eachStartIsAuthorizedOverExactlyTheDataItSends() {
        let seen = Box()
        var h = Harness { $0.dialect = .appSync }
        h.start()
        h.subscribe(.subscription, "subscription { a }")
        h.record(
            h.machine.connectionOpened(
                generation: h.lastGeneration!,
                initPayload: nil,
                protocol: .legacyWS,
                authorizer: { data in
                    seen.append(data)
                    return ByteBuffer(string: #"{"Authorization":"signed \#(data.utf8.count)"}"#)
                },
                now: h.now
            )
        )
        h.receive(#"{"type":"connection_ack"}"#)
        h.subscribe(.subscription, "subscription { b }")
        #expect(seen.values == [#"{"query":"subscription { a }"}"#, #"{"query":"subscription { b }"}"#])
        #expect(h.log.sentTexts.last?.hasSuffix(#""extensions":{"authorization":{"Authorization":"signed 30"}}}}"#) == true)
    }

    @Test func anOperationsErrorReachesClientsAsTheErrorsArray() {
        var (h, id) = connected()
        let error = h.receive(
            #"{"type":"error","id":"1","payload":{"errors":[{"errorType":"UnauthorizedException","message":"Not Authorized to access onTick on type Subscription"}]}}"#
        )
        #expect(
            error.finish(id)
                == .error(
                    .upstream(ByteBuffer(string: #"[{"errorType":"UnauthorizedException","message":"Not Authorized to access onTick on type Subscription"}]"#))
                )
        )
    }

    @Test func anErrorWithoutAnIdLeavesTheConnectionAndItsSubscriptionsAlone() {
        var (h, id) = connected()
        let notice = h.receive(#"{"type":"error","payload":{"errors":[{"errorType":"UnsupportedOperation","message":"unknown message"}]}}"#)
        #expect(notice.isEmpty)
        #expect(h.machine.connectionState == .connected)
        #expect(h.machine.state(of: OperationID(1)) != nil)
        _ = id
    }

    @Test func connectionErrorIsARefusalThatStopsReconnecting() {
        var h = Harness { $0.dialect = .appSync }
        h.start()
        h.subscribe()
        h.record(
            h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, protocol: .legacyWS, authorizer: { _ in authorization }, now: h.now)
        )
        let refused = h.receive(
            #"{"type":"connection_error","payload":{"errors":[{"errorType":"UnauthorizedException","message":"You are not authorized to make this call.","errorCode":401}]}}"#
        )
        #expect(refused.contains { if case .close(_, 1000, _) = $0 { true } else { false } })
        guard case .failed(_, let reason) = h.machine.connectionState else {
            Issue.record("expected failed, got \(h.machine.connectionState)")
            return
        }
        #expect(reason.contains("You are not authorized"))
        #expect(h.advance(ms: 600_000).connects == 0, "no hot loop: a refused authorization waits for a resume or reload")
    }

    @Test func anUpgradeRefusedForItsCredentialsIsFatalToo() {
        var h = Harness { $0.dialect = .appSync }
        h.start()
        let id = h.subscribe()
        let refused = h.record(h.machine.connectionRefused(generation: h.lastGeneration!, reason: "WebSocket upgrade refused: HTTP 401 Unauthorized"))
        #expect(refused.finish(id) != nil)
        guard case .failed(nil, let reason) = h.machine.connectionState else {
            Issue.record("expected failed, got \(h.machine.connectionState)")
            return
        }
        #expect(reason.contains("HTTP 401"))
        #expect(h.advance(ms: 600_000).connects == 0)
        #expect(h.machine.connectionRefused(generation: h.lastGeneration!, reason: "late").isEmpty, "only a connect in progress")
    }

    @Test func silenceLongerThanTheAcksTimeoutIsADeadPeer() {
        var (h, id) = connected(timeoutMs: 10_000)
        h.advance(ms: 9_000)
        h.receive(#"{"type":"ka"}"#)
        h.advance(ms: 9_999)
        #expect(h.machine.connectionState == .connected)
        let dead = h.advance(ms: 1)
        #expect(dead.aborts == 1)
        guard case .reconnecting(_, _, let cause) = h.machine.connectionState else {
            Issue.record("expected reconnecting, got \(h.machine.connectionState)")
            return
        }
        #expect(cause == .deadPeer(silence: .seconds(10), afterKeepAlive: true))
        #expect(h.machine.state(of: OperationID(1)) == .reconnecting)
        _ = id
    }

    @Test func aHugeTimeoutIsCappedAtADayAndNeverWrapsTheDeadline() {
        #expect(AppSyncWire.connectionTimeout(ByteBuffer(string: #"{"connectionTimeoutMs":9223372036854775807}"#)) == .milliseconds(86_400_000))
        #expect(AppSyncWire.connectionTimeout(ByteBuffer(string: #"{"connectionTimeoutMs":99999999999999999999999}"#)) == nil)
        #expect(AppSyncWire.connectionTimeout(ByteBuffer(string: #"{"connectionTimeoutMs":-5}"#)) == nil)
        var (h, _) = connected(timeoutMs: Int.max)
        h.advance(ms: 3_600_000)
        #expect(h.machine.connectionState == .connected, "not declared dead by a wrapped deadline")
    }

    @Test func anAckWithoutATimeoutUsesAppSyncsDocumentedFiveMinutes() {
        var (h, _) = connected(timeoutMs: nil)
        h.advance(ms: 299_999)
        #expect(h.machine.connectionState == .connected)
        #expect(h.advance(ms: 1).aborts == 1)
    }

    @Test func theDialectHasNoPingAndNoGoodbyeMessage() {
        #expect(AppSyncWire.encode(.ping(payload: nil), authorize: nil) == nil)
        #expect(AppSyncWire.encode(.connectionTerminate, authorize: nil) == nil)
        #expect(throws: ProtocolViolation.self) { try AppSyncWire.parse(ByteBuffer(string: #"{"type":"next","id":"1","payload":{}}"#)) }
        #expect(throws: ProtocolViolation.self) { try AppSyncWire.parse(ByteBuffer(string: #"{"type":"start_ack"}"#)) }
    }
}

/// What an authorizer saw (it is `@Sendable`; the machine calls it synchronously).
private final class Box: Sendable {
    private let seen = Mutex<[String]>([])
    var values: [String] { seen.withLock { $0 } }
    func append(_ value: String) { seen.withLock { $0.append(value) } }
}

@Suite struct AppSyncCapTests {
    @Test func maxSubscriptionsReachedHandsTheSubscriptionBackForAnotherConnection() {
        var h = Harness { $0.dialect = .appSync }
        h.start()
        let id = h.subscribe()
        h.record(h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, protocol: .legacyWS, authorizer: nil, now: h.now))
        h.receive(#"{"type":"connection_ack"}"#)
        let full = h.receive(
            #"{"type":"error","id":"1","payload":{"errors":[{"errorType":"MaxSubscriptionsReachedError","message":"Max number of 100 subscriptions reached"}]}}"#
        )
        #expect(full.updates(id) == [.carrierFull])
        #expect(h.machine.operationCount == 0)
        #expect(AppSyncWire.isSubscriptionCap(ByteBuffer(string: #"[{"errorType":"MaxSubscriptionsReachedError"}]"#)))
        #expect(!AppSyncWire.isSubscriptionCap(ByteBuffer(string: #"[{"errorType":"UnauthorizedException"}]"#)))
        #expect(!AppSyncWire.isSubscriptionCap(ByteBuffer(string: #"[]"#)))
    }
}

/// The quarantine holds on AppSync as on any server: a client-blaming close right after a new
/// `start` quarantines that subscription, and the others are started again.
@Suite struct AppSyncQuarantineTests {
    @Test func aBlamingCloseRightAfterAStartQuarantinesItAndOnlyIt() {
        var h = Harness { $0.dialect = .appSync }
        h.start()
        let good = h.subscribe()
        let open = { (h: inout Harness) in
            h.record(h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, protocol: .legacyWS, authorizer: nil, now: h.now))
            h.receive(#"{"type":"connection_ack","payload":{"connectionTimeoutMs":300000}}"#)
        }
        open(&h)
        h.advance(ms: 5_000)
        let poison = h.subscribe(.subscription, "subscription { poison }")
        h.advance(ms: 50)
        let closed = h.serverClose(4400, "bad")
        guard case .error(.transport(.upstreamClosed(let message, _, _))) = closed.finish(poison) else {
            Issue.record("poison not finished: \(closed)")
            return
        }
        #expect(message.contains("quarantined"))
        h.advance(ms: 1_000)
        open(&h)
        let starts = h.log.sentTexts.filter { $0.contains(#""type":"start""#) }
        #expect(starts.filter { $0.contains("poison") }.count == 1, "sent once, ever")
        #expect(starts.filter { $0.contains("tick") }.count == 2, "the other started again")
        #expect(h.machine.state(of: good) != nil)
    }
}
