import EndpointServer
import GQLMuxVocabulary
import Handover
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RequestValidation
import Testing

/// The endpoint's HTTP handler on an `EmbeddedChannel`, in front of a session and a control
/// plane of the test's own: the handler knows no daemon type, so nothing else is needed.
@Suite struct EndpointHTTPHandlerTests {
    final class Host: EndpointHost {
        var endpointAccess = EndpointAccess()
        var endpointToken: EndpointToken?
        var documentLimits = SubscribeRequest.Limits()
        var forwardedHeaders: Set<String> = []
        func servesUpstream(_ name: String) -> Bool { name == "other" }
        var refusals: [EndpointRefusal] = []
        func endpointRefused(_ refusal: EndpointRefusal, listener: ClientOrigin, fields: [String: String], message: String) {
            refusals.append(refusal)
        }
    }

    /// Records the requests it is given and answers through the handler when told to.
    final class Session: ChannelInboundHandler, EndpointSession {
        typealias InboundIn = ClientRequest
        var framing = NextFraming.line
        var inbound: (any InboundBudget)?
        var wire: (any CarriedConnection)?
        var presented = PresentedCredential()
        func present(_ credential: PresentedCredential) { presented = credential }
        func presentPayload(_ payload: [UInt8]?) { presented.payload = payload }
        /// Each `subscribe` as its id and what goes upstream.
        var subscribes: [(id: String, payload: String)] = []
        var context: ChannelHandlerContext?
        func handlerAdded(context: ChannelHandlerContext) { self.context = context }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .subscribe(let id, let request) = unwrapInboundIn(data) else { return }
            subscribes.append((id, (try? request.get()).map { String(buffer: $0.payload) } ?? "invalid"))
        }
        func answer(_ messages: SessionMessage...) {
            for message in messages { context?.write(NIOAny(HTTPOutput.message(message)), promise: nil) }
            context?.flush()
        }
    }

    final class Budget: InboundBudget {
        var held = 0
        func hold(_ bytes: Int) -> Bool { true }
        func release() {}
        var onCut: () -> Void = {}
    }

    private func channel(_ host: Host, _ session: Session) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let writer = EncodedFrameWriter()
        let handler = EndpointHTTPHandler(
            path: "/graphql",
            maxBodyBytes: 1 << 20,
            listener: .endpointSocket,
            host: host,
            reservation: Budget(),
            writer: writer
        ) { _ in session }
        try channel.pipeline.syncOperations.addHandler(writer)
        try channel.pipeline.syncOperations.addHandler(handler)
        return channel
    }

    /// A channel with a fresh control plane and session, and one JSON POST of `body` to it.
    private func posted(_ body: String, headers: [(String, String)]) throws -> (EmbeddedChannel, Host, Session) {
        let host = Host()
        let session = Session()
        let channel = try channel(host, session)
        try request(channel, .POST, "/graphql", headers: [("Host", "localhost"), ("Content-Type", "application/json")] + headers, body: body)
        return (channel, host, session)
    }

    private func request(_ channel: EmbeddedChannel, _ method: HTTPMethod, _ uri: String, headers: [(String, String)], body: String? = nil) throws {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        if let body { try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: body))) }
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
    }

    /// The response written so far: its status and its body.
    private func response(_ channel: EmbeddedChannel) throws -> (status: UInt, body: String)? {
        var status: UInt?
        var body = ""
        while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
            switch part {
            case .head(let head): status = head.status.code
            case .body(.byteBuffer(let bytes)): body += String(buffer: bytes)
            case .body, .end: break
            }
        }
        return status.map { ($0, body) }
    }

    @Test func aForeignPageIsRefusedAtTheHeadAndNeverReachesASession() throws {
        let (channel, host, session) = try posted(#"{"query":"mutation { increment }"}"#, headers: [("Origin", "https://evil.example")])
        #expect(try response(channel)?.status == 403)
        #expect(host.refusals == [.requestRefused])
        #expect(session.subscribes.isEmpty, "nothing went to a session")
    }

    @Test func aQueryBecomesOneSubscribeAndItsResultOneJSONAnswer() throws {
        let (channel, host, session) = try posted(#"{"query":"{ hello }"}"#, headers: [("Accept", "application/json")])
        #expect(session.subscribes.map(\.id) == ["http-1"])
        #expect(session.subscribes.map(\.payload) == [#"{"query":"{ hello }"}"#], "parsed once, by the wire")
        #expect(session.framing == .answer(id: "http-1"), "a JSON answer is assembled from its results as values")
        session.answer(.next(id: "http-1", payload: ByteBuffer(string: #"{"data":{"hello":"world"}}"#), mark: nil), .complete(id: "http-1"))
        let answer = try #require(try response(channel))
        #expect(answer.status == 200)
        #expect(answer.body == #"{"data":{"hello":"world"}}"#)
        #expect(host.refusals.isEmpty)
    }

    @Test func aSubscriptionOverSSEFramesItsResultsAsEvents() throws {
        let (channel, _, session) = try posted(#"{"query":"subscription { tick }"}"#, headers: [("Accept", "text/event-stream")])
        #expect(session.framing == .sse, "results are framed by the fan-out as SSE events")
        #expect(try response(channel)?.status == 200)
        session.context?.writeAndFlush(NIOAny(HTTPOutput.body(ByteBuffer(string: "event: next\ndata: {\"data\":1}\n\n"))), promise: nil)
        var chunks: [String] = []
        while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
            guard case .body(.byteBuffer(let bytes)) = part else { continue }
            chunks.append(String(buffer: bytes))
        }
        #expect(chunks == ["event: next\ndata: {\"data\":1}\n\n"], "framed results go out as they are, one body part")
    }

    /// The connection's timeouts run on the channel's loop clock: here the embedded one, moved by
    /// hand, so each deadline is tested to the millisecond.
    @Test func aBodyThatDoesNotCompleteInThirtySecondsIs408() throws {
        let host = Host()
        let channel = try channel(host, Session())
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/graphql")
        head.headers.add(name: "Host", value: "localhost")
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: "100")
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: #"{"query":"#)))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(29_999))
        #expect(host.refusals.isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(host.refusals == [.requestTimeout])
        #expect(try response(channel)?.status == 408)
    }

    @Test func anIdleConnectionIsClosedAfterSixtySecondsOfKeepAlive() throws {
        let host = Host()
        let session = Session()
        let channel = try channel(host, session)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try request(channel, .POST, "/graphql", headers: [("Host", "localhost"), ("Content-Type", "application/json")], body: #"{"query":"{ hello }"}"#)
        session.answer(.next(id: "http-1", payload: ByteBuffer(string: #"{"data":{"hello":"world"}}"#), mark: nil), .complete(id: "http-1"))
        #expect(try response(channel)?.status == 200)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(59_999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "closed at the keep-alive timeout")
        #expect(host.refusals == [.requestTimeout])
    }
}
