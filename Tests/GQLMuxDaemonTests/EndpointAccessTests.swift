import EndpointServer
import Foundation
import GQLMuxConfiguration
import GQLMuxVocabulary
import GraphQLTransportWS
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOWebSocket
import Testing

@testable import GQLMuxDaemon

/// The endpoint's doors as pure decisions: the browser checks, the token, media types, the
/// HTTP deadlines on a manual clock, the descriptor plan, and the configuration that sets them.
@Suite struct EndpointAccessTests {
    let access = EndpointAccess(allowedHosts: ["gqlmux.internal", "box:8080"], allowedOrigins: ["http://127.0.0.3:8000"])

    func check(host: [String], origin: [String] = [], site: [String] = []) -> EndpointAccess.Decision {
        access.check(.init(host: host, origin: origin, secFetchSite: site))
    }

    @Test(arguments: [
        "localhost", "localhost:4000", "127.0.0.1", "127.0.0.1:4000", "127.255.0.9:1", "[::1]", "[::1]:4000", "[0:0:0:0:0:0:0:1]:80",
        "LOCALHOST:4000", "gqlmux.internal:9", "box:8080",
    ])
    func loopbackAndAllowedHostsAreServed(host: String) {
        #expect(check(host: [host]) == .allow(corsOrigin: nil))
    }

    @Test(arguments: [
        "evil.example:4000", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "128.0.0.1", "[::2]", "0.0.0.0",
        "box:8081", "box", "[::ffff:127.0.0.1]", "127.1", "localhost.", "127.0.0.256",
    ])
    func foreignHostsAreRefused(host: String) {
        guard case .refuse(403, .foreignHost, _) = check(host: [host]) else {
            Issue.record("\(host) was not refused")
            return
        }
    }

    @Test func aMissingOrDoubledOrMalformedHostIsABadRequest() {
        for hosts in [[], ["localhost", "localhost"], ["local host"], ["localhost:x"], ["[::1"], [""]] {
            guard case .refuse(400, .missingHost, _) = check(host: hosts) else {
                Issue.record("\(hosts) was not refused with 400")
                continue
            }
        }
    }

    @Test(arguments: ["https://evil.example", "null", "NULL", "http://127.0.0.2:8000", "http://127.0.0.3:8001", "https://127.0.0.3:8000", "file://"])
    func pagesFromOtherOriginsAreRefused(origin: String) {
        guard case .refuse(403, .foreignOrigin, _) = check(host: ["127.0.0.1:4000"], origin: [origin]) else {
            Issue.record("\(origin) was not refused")
            return
        }
    }

    @Test func anAllowedOriginIsServedAndEchoedExactly() {
        #expect(check(host: ["127.0.0.1:4000"], origin: ["http://127.0.0.3:8000"], site: ["cross-site"]) == .allow(corsOrigin: "http://127.0.0.3:8000"))
        #expect(check(host: ["127.0.0.1:4000"], origin: ["HTTP://127.0.0.3:8000"]) == .allow(corsOrigin: "HTTP://127.0.0.3:8000"))
        // Two Origin headers: refused, whatever they say.
        guard case .refuse(403, .foreignOrigin, _) = check(host: ["localhost"], origin: ["http://127.0.0.3:8000", "http://127.0.0.3:8000"]) else {
            Issue.record("two origins were served")
            return
        }
    }

    @Test func fetchMetadataFromAnotherSiteIsRefusedWithoutAnOrigin() {
        for site in ["cross-site", "same-site", "Cross-Site"] {
            guard case .refuse(403, .foreignOrigin, _) = check(host: ["localhost:4000"], site: [site]) else {
                Issue.record("Sec-Fetch-Site: \(site) was served")
                continue
            }
        }
        #expect(check(host: ["localhost:4000"], site: ["same-origin"]) == .allow(corsOrigin: nil))
        #expect(check(host: ["localhost:4000"], site: ["none"]) == .allow(corsOrigin: nil))
    }

    @Test func originsAreNormalized() {
        #expect(EndpointAccess.normalizeOrigin("HTTPS://App.Example:443") == "https://app.example")
        #expect(EndpointAccess.normalizeOrigin("http://app.example:80") == "http://app.example")
        #expect(EndpointAccess.normalizeOrigin("http://app.example:8080") == "http://app.example:8080")
        for bad in ["null", "*", "app.example", "http://app.example/", "http://user@app.example", "ftp://app.example", "http://"] {
            #expect(EndpointAccess.normalizeOrigin(bad) == nil, "\(bad)")
        }
    }

    // MARK: - Token

    @Test func theTokenIsCheckedInHeadersAndConnectionInit() throws {
        let token = try #require(EndpointToken(fileContents: "  0123456789abcdef-token\n"))
        #expect(EndpointToken(fileContents: "short\n") == nil)
        #expect(EndpointToken(fileContents: "has a space in it 0123") == nil)
        #expect(token.check(authorization: []) == .none)
        #expect(token.check(authorization: ["Bearer 0123456789abcdef-token"]) == .valid)
        #expect(token.check(authorization: ["bearer 0123456789abcdef-token"]) == .valid)
        #expect(token.check(authorization: ["Bearer 0123456789abcdef-tokeN"]) == .invalid)
        #expect(token.check(authorization: ["Bearer 0123456789abcdef-token0"]) == .invalid)
        #expect(token.check(authorization: ["Bearer 0123456789abcdef-toke"]) == .invalid)
        #expect(token.check(authorization: ["Basic 0123456789abcdef-token"]) == .invalid)
        #expect(token.check(authorization: ["Bearer 0123456789abcdef-token", "Bearer 0123456789abcdef-token"]) == .invalid)
        #expect(token.accepts(initPayload: ByteBuffer(string: #"{"token":"0123456789abcdef-token"}"#)))
        #expect(token.accepts(initPayload: ByteBuffer(string: #"{"authorization":"Bearer 0123456789abcdef-token"}"#)))
        #expect(token.accepts(initPayload: ByteBuffer(string: #"{"Authorization":"Bearer 0123456789abcdef-token"}"#)))
        #expect(!token.accepts(initPayload: ByteBuffer(string: #"{"token":"0123456789abcdef-wrong"}"#)))
        #expect(!token.accepts(initPayload: ByteBuffer(string: #"{"token":5}"#)))
        #expect(!token.accepts(initPayload: nil))
    }

    @Test func aWebSocketClientWithoutTheTokenIsClosed4403() {
        let token = EndpointToken(fileContents: "0123456789abcdef-token")!
        var modern = WebSocketServerSession(wire: .transportWS, token: token)
        #expect(
            modern.received(ByteBuffer(string: #"{"type":"connection_init","payload":{"token":"nope-nope-nope-nope"}}"#)) == [
                .close(code: .forbidden, reason: "Forbidden")
            ]
        )
        #expect(modern.deniedToken)
        var legacy = WebSocketServerSession(wire: .legacyWS, token: token)
        let actions = legacy.received(ByteBuffer(string: #"{"type":"start","id":"1","payload":{"query":"mutation { x }"}}"#))
        #expect(actions.last == .close(code: .forbidden, reason: "Forbidden"))
        #expect(!actions.contains { if case .subscribe = $0 { true } else { false } }, "nothing reaches the daemon")
        var good = WebSocketServerSession(wire: .transportWS, token: token)
        #expect(good.received(ByteBuffer(string: #"{"type":"connection_init","payload":{"token":"0123456789abcdef-token"}}"#)).count == 1)
        #expect(good.acknowledged)
    }

    // MARK: - Media types and GET

    @Test func mediaTypesAreMatchedExactly() {
        #expect(MediaType("application/json")?.isJSON == true)
        #expect(MediaType("Application/JSON; charset=UTF-8")?.isJSON == true)
        #expect(MediaType("application/json;charset=\"utf-8\"")?.isUTF8 == true)
        #expect(MediaType("application/json; charset=latin1")?.isUTF8 == false)
        #expect(MediaType("application/jsonx")?.isJSON == false)
        #expect(MediaType("application/json+x")?.isJSON == false)
        #expect(MediaType("text/plain")?.isJSON == false)
        #expect(MediaType("application/json x") == nil)
        #expect(MediaType.list("text/event-stream;q=0, application/json").map(\.essence) == ["application/json"])
    }

    func start(_ method: String, contentType: String? = "application/json", kind: OperationKind?) -> HTTPExchange.Start {
        HTTPExchange.start(
            method: method,
            accept: "application/json",
            contentType: contentType,
            body: ByteBuffer(string: #"{"query":"x"}"#),
            queryItems: [("query", "x")],
            id: "h"
        ) { _ in kind }
    }

    @Test func getRunsOnlyAQueryThatParses() {
        for kind: OperationKind? in [nil, .mutation, .subscription] {
            guard case .reject(405, _) = start("GET", kind: kind) else {
                Issue.record("GET ran \(String(describing: kind))")
                continue
            }
        }
        if case .subscribe = start("GET", kind: .query) {} else { Issue.record("GET query refused") }
        if case .reject(415, _) = start("POST", contentType: "application/jsonx", kind: .query) {} else { Issue.record("jsonx accepted") }
        if case .reject(415, _) = start("POST", contentType: "text/plain", kind: .query) {} else { Issue.record("text/plain accepted") }
        if case .subscribe = start("POST", contentType: "application/json; charset=utf-8", kind: .query) {} else { Issue.record("charset refused") }
    }

    /// GraphQL over HTTP's SHOULDs: `application/json` for a client that names no type or accepts
    /// anything; a document gqlmuxd rejects answered as one the server rejects.
    @Test(arguments: [
        ("", "application/json"), ("*/*", "application/json"), ("application/*", "application/json"),
        ("application/json", "application/json"), ("application/graphql-response+json", "application/graphql-response+json"),
        ("application/graphql-response+json, application/json;q=0.9", "application/graphql-response+json"),
        ("text/html", "application/graphql-response+json"),
    ])
    func theAnswersTypeAndTheStatusOfARejectedDocument(accept: String, type: String) {
        let started = HTTPExchange.start(
            method: "POST",
            accept: accept,
            contentType: "application/json",
            body: ByteBuffer(string: #"{"query":"{"}"#),
            queryItems: [],
            id: "h",
            kindOf: { _ in nil }
        )
        guard case .subscribe(_, var exchange) = started else {
            Issue.record("refused")
            return
        }
        let rejected = SessionMessage.error(id: "h", .local(code: .invalidDocument, message: "Syntax Error"))
        guard case .head(let status, let contentType)? = exchange.deliver(rejected).first else {
            Issue.record("no answer")
            return
        }
        #expect(contentType == type + "; charset=utf-8")
        #expect(status == (type == "application/json" ? 200 : 400))
    }

    /// A result framed once for a WebSocket client is the frame NIO's own encoder would make of
    /// the message the translating path sent.
    @Test(arguments: [10, 200, 70_000])
    func framedResultsAreWholeWebSocketFrames(payloadBytes: Int) {
        let payload = ByteBuffer(string: #"{"data":""# + String(repeating: "x", count: payloadBytes) + #""}"#)
        for wire in WireProtocol.allCases {
            let framing = NextFraming.webSocket(wire)
            var message = framing.prefix(id: "a\"b")
            message.writeImmutableBuffer(payload)
            message.writeStaticString(framing.suffix)
            #expect(framing.hasHeader)
            var framed = ByteBuffer()
            NextFraming.writeWebSocketHeader(length: message.readableBytes, to: &framed)
            framed.writeImmutableBuffer(message)
            #expect(framed == EndpointWebSocketHandler.frame(.text, message))
            let type = wire == .transportWS ? "next" : "data"
            #expect(String(buffer: message).hasPrefix(#"{"type":"\#(type)","id":"a\"b","payload":{"data""#))
        }
        #expect(!NextFraming.line.hasHeader && !NextFraming.sse.hasHeader && !NextFraming.multipart.hasHeader)
    }

    /// A stream's batch sealed as a chunk by the session is byte for byte what NIO's HTTP
    /// encoder writes for that body part (its three buffers: size line, bytes, CRLF); an
    /// empty batch becomes nothing (an empty chunk would end the body).
    @Test(arguments: [0, 1, 15, 16, 255, 256, 4_095, 32_768, 70_000])
    func sealedChunksAreWhatNIOsEncoderWrites(size: Int) throws {
        let body = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 % 251) })
        var batch = ByteBuffer(repeating: 0xEE, count: NextFraming.chunkHeaderRoom)
        batch.writeImmutableBuffer(body)
        NextFraming.sealChunk(&batch)

        let channel = EmbeddedChannel(handler: HTTPResponseEncoder())
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Transfer-Encoding", value: "chunked")
        try channel.writeOutbound(HTTPServerResponsePart.head(head))
        _ = try channel.readOutbound(as: ByteBuffer.self)
        if size > 0 { try channel.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(body))) }
        var encoded = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { encoded.writeBuffer(&part) }
        #expect(batch == encoded)
        #expect(batch.readableBytes == (size == 0 ? 0 : String(size, radix: 16).utf8.count + 4 + size))
    }

    /// A stream's result framed once by the session is what the exchange makes of the same
    /// result given as a value (a replay's, marked, aside).
    @Test(arguments: ["text/event-stream", "multipart/mixed;subscriptionSpec=1.0"])
    func framedStreamResultsAreTheExchangesOwnEvents(accept: String) {
        let started = HTTPExchange.start(
            method: "POST",
            accept: accept,
            contentType: "application/json",
            body: ByteBuffer(string: #"{"query":"subscription { t }"}"#),
            queryItems: [],
            id: "h",
            kindOf: { _ in .subscription }
        )
        guard case .subscribe(_, var exchange) = started else {
            Issue.record("refused")
            return
        }
        let payload = ByteBuffer(string: #"{"data":{"t":1}}"#)
        let translated = exchange.deliver(.next(id: "h", payload: payload, mark: nil))
        var framed = exchange.framing.prefix(id: "h")
        framed.writeImmutableBuffer(payload)
        framed.writeStaticString(exchange.framing.suffix)
        #expect(translated == [.body(framed)])
    }

    @Test func rawErrorAnswersAreWholeResponses() {
        let raw = String(buffer: HTTPErrorResponse.raw(status: 503, reason: "Service Unavailable", message: "full \"now\"", headers: [("Retry-After", "1")]))
        let parts = raw.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 2 && parts[0].hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(parts[0].contains("Retry-After: 1") && parts[0].contains("Connection: close"))
        #expect(parts[0].contains("Content-Length: \(parts[1].utf8.count)"))
        #expect(parts[1] == #"{"errors":[{"message":"full \"now\""}]}"#)
    }

    // MARK: - HTTP deadlines on a manual clock

    func at(_ seconds: Double) -> Instant { Instant(nanoseconds: Int64(seconds * 1e9)) }

    @Test func aConnectionThatNeverFinishesItsHeadIsTimedOutAfterTenSeconds() {
        let timeouts = HTTPConnectionTimeouts(connectedAt: at(0))
        #expect(timeouts.expired(at: at(9.999)) == nil)
        #expect(timeouts.expired(at: at(10)) == .header)
    }

    @Test func aBodyHasThirtySecondsAndAnAnswerHasNoDeadline() {
        var timeouts = HTTPConnectionTimeouts(connectedAt: at(0))
        timeouts.headReceived(at: at(5))
        #expect(timeouts.expired(at: at(34.9)) == nil)
        #expect(timeouts.expired(at: at(35)) == .body)
        timeouts.requestEnded()
        #expect(timeouts.deadline == nil)
        #expect(timeouts.expired(at: at(10_000)) == nil, "a streamed answer is never timed out")
    }

    @Test func keepAliveIdlesSixtySecondsThenTheNextRequestHasTenForItsHead() {
        var timeouts = HTTPConnectionTimeouts(connectedAt: at(0))
        timeouts.headReceived(at: at(1))
        timeouts.requestEnded()
        timeouts.responseEnded(at: at(2))
        #expect(timeouts.expired(at: at(61.9)) == nil)
        #expect(timeouts.expired(at: at(62)) == .keepAlive)
        timeouts.bytesArrived(at: at(30))
        #expect(timeouts.expired(at: at(39.9)) == nil)
        #expect(timeouts.expired(at: at(40)) == .header, "a trickled second request gets the header deadline from its first byte")
        timeouts.bytesArrived(at: at(35))
        #expect(timeouts.expired(at: at(40)) == .header, "more bytes of the same head do not extend it")
    }

    // MARK: - Descriptors

    func configuration(_ toml: String) throws -> DaemonConfiguration {
        try DaemonConfiguration.parse("[upstream]\nurl = \"ws://127.0.0.1:1/\"\n[socket]\npath = \"/tmp/x/g.sock\"\n" + toml)
    }

    @Test func listenersShareTheOpenFileLimitInProportion() throws {
        let c = try configuration("[graphql_endpoint]\nlisten = \"127.0.0.1:4000\"\n")
        let roomy = DescriptorPlan(openFiles: 16384, configuration: c)
        #expect(roomy.lineSocket == 1024 && roomy.endpointSocket == 1024 && roomy.endpointTCP == 256 && !roomy.lowered)
        let tight = DescriptorPlan(openFiles: 1024, configuration: c)
        #expect(tight.lowered)
        #expect(tight.lineSocket + tight.endpointSocket + tight.endpointTCP + tight.reserve <= 1024 + 2)
        #expect(tight.lineSocket == tight.endpointSocket && tight.endpointTCP * 4 <= tight.lineSocket + 4, "in proportion: \(tight)")
        #expect(tight.lineSocket > 300 && tight.endpointTCP > 75, "each keeps room of its own: \(tight)")
        #expect(tight.reserve >= 64 + 4, "a reserve for the upstream pool and gqlmuxd's own files")
    }

    // MARK: - Configuration

    @Test func listenWithAllowedUIDsNeedsATokenOrAnExplicitOptIn() throws {
        let toml = "[security]\nallowed_uids = [1000]\n[graphql_endpoint]\nlisten = \"127.0.0.1:4000\"\n"
        #expect(throws: ConfigurationError.self) { try configuration(toml) }
        do {
            _ = try configuration(toml)
        } catch let error as ConfigurationError {
            #expect(error.description.contains("token_file") && error.description.contains("allow_all_local_users"), "\(error)")
        }
        #expect(try configuration(toml + "allow_all_local_users = true\n").graphqlEndpoint.allowAllLocalUsers)
        let directory = try makeTemporaryDirectory("gqlmux-token")
        let file = directory + "/token"
        try "0123456789abcdef0123\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        #expect(throws: ConfigurationError.self, "a token every user can read") { try configuration(toml + "token_file = \"\(file)\"\n") }
        chmod(file, 0o600)
        #expect(try configuration(toml + "token_file = \"\(file)\"\n").graphqlEndpoint.token == EndpointToken(fileContents: "0123456789abcdef0123"))
    }

    @Test func endpointKeysAreChecked() throws {
        let c = try configuration(
            """
            [graphql_endpoint]
            allowed_hosts = ["GQLMUX.internal", "box:8080"]
            allowed_origins = ["https://App.Example:443", "http://127.0.0.3:8000"]
            socket_max_connections = 50
            listen_max_connections = 10
            """
        )
        #expect(c.graphqlEndpoint.access.allowedHosts == ["gqlmux.internal", "box:8080"])
        #expect(c.graphqlEndpoint.access.allowedOrigins == ["https://app.example", "http://127.0.0.3:8000"])
        #expect(c.graphqlEndpoint.socketMaxConnections == 50 && c.graphqlEndpoint.listenMaxConnections == 10)
        for bad in [
            "allowed_origins = [\"null\"]", "allowed_origins = [\"*\"]", "allowed_origins = [\"http://a/b\"]", "allowed_hosts = [\"a b\"]",
            "listen_max_connections = 0", "socket_max_connections = 70000", "allowed_hosts = \"x\"",
        ] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try configuration("[graphql_endpoint]\n\(bad)\n") }
        }
    }
}
