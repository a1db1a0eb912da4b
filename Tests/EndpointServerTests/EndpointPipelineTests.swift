import EndpointServer
import GQLMuxVocabulary
import Handover
import LocalEndpoint
import NIOCore
import NIOEmbedded
import RequestValidation
import Testing

/// ``EndpointPipeline`` on an `EmbeddedChannel` and its manual clock, with a control plane and
/// sessions of the test's own: one entry builds an accepted connection's pipeline and a carried
/// one's, each session learns which handler owns its wire, and that wire says for itself what
/// the handover record must hold.
@Suite struct EndpointPipelineTests {
    final class Session: ChannelInboundHandler, EndpointSession {
        typealias InboundIn = ClientRequest
        var framing = NextFraming.line
        var inbound: (any InboundBudget)?
        var wire: (any CarriedConnection)?
        var presented = PresentedCredential()
        func present(_ credential: PresentedCredential) { presented = credential }
        func presentPayload(_ payload: [UInt8]?) { presented.payload = payload }
        /// The ids of the `subscribe`s it heard.
        var subscribed: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .subscribe(let id, _) = unwrapInboundIn(data) { subscribed.append(id) }
        }
    }

    final class Budget: InboundBudget {
        var held = 0
        func hold(_ bytes: Int) -> Bool {
            held = bytes
            return true
        }
        func release() { held = 0 }
        var onCut: () -> Void = {}
    }

    final class Host: EndpointConnectionHost {
        var endpointAccess = EndpointAccess()
        var endpointToken: EndpointToken?
        var documentLimits = SubscribeRequest.Limits()
        var forwardedHeaders: Set<String> = []
        func servesUpstream(_ name: String) -> Bool { name == "other" }
        var endpointPath = "/graphql"
        var maxMessageBytes = 1 << 20
        var sessions: [Session] = []
        var refusals: [EndpointRefusal] = []
        func endpointSession(_ channel: any Channel, origin: ClientOrigin, wire: EndpointWire) -> Session {
            let session = Session()
            sessions.append(session)
            return session
        }
        func makeInboundBudget() -> any InboundBudget { Budget() }
        func endpointRefused(_ refusal: EndpointRefusal, listener: ClientOrigin, fields: [String: String], message: String) {
            refusals.append(refusal)
        }
    }

    private func record(_ kind: HandoverState.Kind, acknowledged: Bool = true) -> HandoverState.Client {
        HandoverState.Client(
            cookie: 7,
            origin: .endpointSocket,
            kind: kind,
            acknowledged: acknowledged,
            subscriptions: [.init(id: "s1", payload: #"{"query":"subscription { tick }"}"#)]
        )
    }

    /// Everything written so far, as one string.
    private func written(_ channel: EmbeddedChannel) throws -> String {
        var all = ""
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { all += String(buffer: bytes) }
        return all
    }

    /// Each endpoint kind carried over a restart comes back with its session, the session knows
    /// its wire, and the wire describes itself exactly as the record did, until it is handed
    /// over again.
    @Test(arguments: [
        (HandoverState.Kind.transportWS, true), (.transportWS, false), (.legacyWS, true), (.sse, true), (.multipart, true),
    ])
    func everyCarriedKindComesBackSayingWhatItIs(kind: HandoverState.Kind, acknowledged: Bool) throws {
        let host = Host()
        let channel = EmbeddedChannel()
        let session = try EndpointPipeline.configure(channel, origin: .endpointSocket, arrival: .carried(record(kind, acknowledged: acknowledged)), host: host)
        #expect(session === host.sessions.first)
        #expect(host.sessions.count == 1)
        let wire = try #require(session?.wire)
        #expect(wire.carriage == HandoverState.Carriage(kind, acknowledged: acknowledged))
        #expect(session?.inbound != nil, "its share of the memory budget")
        switch kind {
        case .transportWS: #expect(session?.framing == .webSocket(.transportWS))
        case .legacyWS: #expect(session?.framing == .webSocket(.legacyWS))
        case .sse: #expect(session?.framing.isChunked == true)
        case .multipart: #expect(session?.framing.isChunked == true)
        case .line: Issue.record("not an endpoint kind")
        }
        wire.handOver()
        #expect(wire.carriage == nil, "handed over: nothing more of this process's")
    }

    /// A carried stream goes on as chunks of the body the previous process began: its heartbeat
    /// (multipart every 5 s, SSE every 12 s) comes on the loop's clock, chunked.
    @Test(arguments: [(HandoverState.Kind.multipart, Int64(5)), (.sse, 12)])
    func aCarriedStreamKeepsItsHeartbeatAsChunksOfItsBody(kind: HandoverState.Kind, every: Int64) throws {
        let channel = EmbeddedChannel()
        try EndpointPipeline.configure(channel, origin: .endpointSocket, arrival: .carried(record(kind)), host: Host())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(try written(channel).isEmpty, "the head went out before the restart")
        channel.embeddedEventLoop.advanceTime(by: .seconds(every - 1))
        #expect(try written(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        let beat = kind == .sse ? ":\n\n" : "\r\ncontent-type: application/json\r\n\r\n{}\r\n--graphql"
        let chunk = try written(channel)
        #expect(chunk == String(beat.utf8.count, radix: 16) + "\r\n" + beat + "\r\n", "a chunk of the body: \(chunk.debugDescription)")
    }

    /// A carried legacy client hears a `ka` as soon as its connection is active, as a fresh one
    /// hears one with its `connection_ack`.
    @Test func aCarriedLegacyClientHearsAKeepAliveOnceActive() throws {
        let channel = EmbeddedChannel()
        try EndpointPipeline.configure(channel, origin: .endpointSocket, arrival: .carried(record(.legacyWS)), host: Host())
        #expect(try written(channel).isEmpty, "not active yet")
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(try written(channel).contains(#"{"type":"ka"}"#))
    }

    /// An accepted connection gets HTTP with the upgrade; a WebSocket upgrade goes through the
    /// same builder as a carried WebSocket: its session's wire is the WebSocket handler, not yet
    /// acknowledged, and a `connection_init` reaches the session as a line.
    @Test func anAcceptedUpgradeEndsWithTheWebSocketHandlersAndASession() throws {
        let host = Host()
        let channel = EmbeddedChannel()
        #expect(try EndpointPipeline.configure(channel, origin: .endpointSocket, arrival: .accepted, host: host) == nil)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(host.sessions.isEmpty, "a session comes with the first request")
        let upgrade =
            "GET /graphql HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
        try channel.writeInbound(ByteBuffer(string: upgrade))
        channel.embeddedEventLoop.run()
        #expect(try written(channel).hasPrefix("HTTP/1.1 101 Switching Protocols"))
        let session = try #require(host.sessions.first)
        #expect(session.wire?.carriage == HandoverState.Carriage(.transportWS, acknowledged: false))
        #expect(session.framing == .webSocket(.transportWS))
        // Masked text frames, as a client sends them.
        func send(_ json: String) throws {
            let text = Array(json.utf8)
            var frame = ByteBuffer(bytes: [0x81, 0x80 | UInt8(text.count), 1, 2, 3, 4])
            frame.writeBytes(text.enumerated().map { $0.element ^ [1, 2, 3, 4][$0.offset % 4] })
            try channel.writeInbound(frame)
        }
        try send(#"{"type":"connection_init"}"#)
        #expect(try written(channel).contains(#"{"type":"connection_ack"}"#))
        #expect(session.wire?.carriage == HandoverState.Carriage(.transportWS, acknowledged: true))
        try send(#"{"id":"1","type":"subscribe","payload":{"query":"subscription { tick }"}}"#)
        #expect(session.subscribed.count == 1, "the session hears the subscribe")
    }

    /// The line protocol is not the endpoint's: asked to rebuild it, the builder refuses and adds
    /// nothing.
    @Test func aLineClientIsNotTheEndpoints() throws {
        let host = Host()
        let channel = EmbeddedChannel()
        #expect(throws: EndpointPipelineError.self) {
            try EndpointPipeline.configure(channel, origin: .lineSocket, arrival: .carried(record(.line)), host: host)
        }
        #expect(host.sessions.isEmpty)
    }
}
