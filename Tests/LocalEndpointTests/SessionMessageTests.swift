import GQLMuxVocabulary
import JSONEnvelope
import LocalEndpoint
import LocalProtocol
import NIOCore
import RequestValidation
import Testing

/// The seam between a session and its wires, as values: each wire writes each message in its
/// own words (the line protocol, both WebSocket subprotocols, an HTTP answer), and the line
/// wire reads each line as a request with its document parsed once.
@Suite struct SessionMessageTests {
    private let upstreamErrors = ByteBuffer(string: #"[{"message":"no \"tick\"","path":["tick"]},{"message":"second"}]"#)

    @Test func theLineProtocolWritesEachMessageAsOneLine() {
        let lines: [(SessionMessage, String)] = [
            (.state(id: "a", .active, gapMs: 1_250), #"{"type":"state","id":"a","state":"active","gapMs":1250}"#),
            (.state(id: "a", .reconnecting, gapMs: nil), #"{"type":"state","id":"a","state":"reconnecting"}"#),
            (.complete(id: "a\"b"), #"{"type":"complete","id":"a\"b"}"#),
            (.next(id: "a", payload: ByteBuffer(string: #"{"data":1}"#), mark: .replayed), #"{"type":"next","id":"a","payload":{"data":1},"replayed":true}"#),
            (.next(id: "a", payload: ByteBuffer(string: #"{"data":1}"#), mark: nil), #"{"type":"next","id":"a","payload":{"data":1}}"#),
            (
                .error(id: "a", .local(code: .upstreamClosed, message: "closed", extra: [.init("closeCode", json: "4500")])),
                #"{"type":"error","id":"a","payload":[{"message":"closed","extensions":{"code":"UPSTREAM_CLOSED","closeCode":4500}}]}"#
            ),
            (.error(id: "a", .upstream(errors: upstreamErrors)), #"{"type":"error","id":"a","payload":"# + String(buffer: upstreamErrors) + "}"),
            (
                .error(id: nil, .local(code: .slowConsumer, message: "slow")),
                #"{"type":"error","payload":[{"message":"slow","extensions":{"code":"SLOW_CONSUMER"}}]}"#
            ),
            (.ok(id: nil), #"{"type":"ok"}"#),
            (.pong(payload: ByteBuffer(string: #"{"t":1}"#)), #"{"type":"pong","payload":{"t":1}}"#),
            (.metrics(id: "m", text: "a 1\n"), #"{"type":"metrics","id":"m","payload":"a 1\n"}"#),
        ]
        for (message, line) in lines {
            let written = LocalEncode.line(message)
            #expect(String(buffer: written) == line + "\n")
            #expect(written.withUnsafeReadableBytes { (try? JSONScanner.validate(UnsafeRawBufferPointer(rebasing: $0.dropLast()))) } == .object)
        }
    }

    @Test func graphqlTransportWSSendsErrorsWholeAndClosesOnADuplicateID() {
        var session = WebSocketServerSession(wire: .transportWS, acknowledged: true)
        #expect(
            session.deliver(.error(id: "a", .upstream(errors: upstreamErrors))) == [
                .send(ByteBuffer(string: #"{"type":"error","id":"a","payload":"# + String(buffer: upstreamErrors) + "}"))
            ]
        )
        #expect(session.deliver(.complete(id: "a")) == [.send(ByteBuffer(string: #"{"type":"complete","id":"a"}"#))])
        #expect(session.deliver(.state(id: "a", .active, gapMs: nil)).isEmpty, "states are gqlmuxd's own vocabulary")
        #expect(
            session.deliver(.error(id: "a", .local(code: .duplicateID, message: "in use"))) == [
                .close(code: .subscriberAlreadyExists, reason: "Subscriber for a already exists")
            ]
        )
        #expect(session.deliver(.complete(id: "b")).isEmpty, "nothing after the close")
    }

    @Test func graphqlWSSendsTheFirstErrorAndMarksWhatGqlmuxdGivesItself() {
        var session = WebSocketServerSession(wire: .legacyWS, acknowledged: true)
        #expect(
            session.deliver(.error(id: "a", .upstream(errors: upstreamErrors))) == [
                .send(ByteBuffer(string: #"{"type":"error","id":"a","payload":{"message":"no \"tick\"","path":["tick"]}}"#))
            ]
        )
        #expect(
            session.deliver(.error(id: "a", .local(code: .invalidDocument, message: "Syntax Error")))
                == [.send(ByteBuffer(string: #"{"type":"error","id":"a","payload":{"message":"Syntax Error","extensions":{"code":"INVALID_DOCUMENT"}}}"#))]
        )
        #expect(
            session.deliver(.error(id: "a", .upstream(errors: ByteBuffer(string: "[]")))) == [
                .send(ByteBuffer(string: #"{"type":"error","id":"a","payload":{}}"#))
            ]
        )
        guard case .send(let replay)? = session.deliver(.next(id: "a", payload: ByteBuffer(string: #"{"data":{"t":1}}"#), mark: .replayed)).first else {
            Issue.record("no frame for a replay")
            return
        }
        #expect(String(buffer: replay) == #"{"type":"data","id":"a","payload":{"data":{"t":1},"extensions":{"gqlmux":{"replayed":true}}}}"#)
    }

    @Test(arguments: [
        (LocalErrorCode.slowConsumer, CloseCode.policyViolation), (.shuttingDown, .goingAway), (.limitExceeded, .tryAgainLater), (.forbidden, .forbidden),
    ])
    func anErrorForTheWholeConnectionIsItsCloseCode(code: LocalErrorCode, close: CloseCode) {
        for wire in WireProtocol.allCases {
            var session = WebSocketServerSession(wire: wire, acknowledged: true)
            #expect(session.deliver(.error(id: nil, .local(code: code, message: "why"))) == [.close(code: close, reason: "why")])
        }
    }

    @Test func aSingleAnswerCollectsItsResultAndIgnoresAnotherOperations() {
        guard
            case .subscribe(_, var exchange) = HTTPExchange.start(
                method: "POST",
                accept: "application/json",
                contentType: "application/json",
                body: ByteBuffer(string: #"{"query":"{ a }"}"#),
                queryItems: [],
                id: "http-2",
                kindOf: { _ in .query }
            )
        else {
            Issue.record("refused")
            return
        }
        #expect(exchange.framing == .answer(id: "http-2"))
        #expect(exchange.deliver(.next(id: "http-1", payload: ByteBuffer(string: #"{"data":0}"#), mark: nil)).isEmpty)
        #expect(exchange.deliver(.complete(id: "http-1")).isEmpty, "the answer before is not this one's")
        #expect(exchange.deliver(.next(id: "http-2", payload: ByteBuffer(string: #"{"data":{"a":1}}"#), mark: nil)).isEmpty)
        let answer = exchange.deliver(.complete(id: "http-2"))
        #expect(answer == [.head(status: 200, contentType: "application/json; charset=utf-8"), .body(ByteBuffer(string: #"{"data":{"a":1}}"#)), .end])
        #expect(exchange.ended)
    }

    @Test func theLineWireReadsEachLineAsARequestParsedOnce() {
        let limits = SubscribeRequest.Limits()
        guard
            case .subscribe("s", .success(let request)) = ClientRequest(
                line: ByteBuffer(string: #"{"type":"subscribe","id":"s","payload":{"query":"subscription { t }"}}"#),
                limits: limits
            )
        else {
            Issue.record("not a parsed subscribe")
            return
        }
        #expect(request.kind == .subscription)
        guard
            case .subscribe("s", .failure(let invalid)) = ClientRequest(
                line: ByteBuffer(string: #"{"type":"subscribe","id":"s","payload":{"query":"{"}}"#),
                limits: limits
            )
        else {
            Issue.record("a bad document is not refused for its id")
            return
        }
        #expect(invalid.code == .invalidDocument)
        let tight = SubscribeRequest.Limits(maxTokens: 3, maxDepth: 2)
        guard
            case .subscribe(_, .failure(let tooBig)) = ClientRequest(
                line: ByteBuffer(string: #"{"type":"subscribe","id":"s","payload":{"query":"{ a b c d }"}}"#),
                limits: tight
            )
        else {
            Issue.record("the limits in force are not applied")
            return
        }
        #expect(tooBig.code == .invalidDocument || tooBig.code == .limitExceeded)
        guard
            case .connectionInit("app", nil)? = Optional(
                ClientRequest(line: ByteBuffer(string: #"{"type":"connection_init","payload":{"client":"app"}}"#), limits: limits)
            )
        else {
            Issue.record("no client name")
            return
        }
        guard case .admin(.reload, "r", nil)? = Optional(ClientRequest(line: ByteBuffer(string: #"{"type":"reload","id":"r"}"#), limits: limits)) else {
            Issue.record("not an admin verb")
            return
        }
        for (line, reason) in [
            ("{", "invalid message"), (#"{"type":"next","id":"a"}"#, "'next' is sent by the daemon"), (#"{"type":"nope"}"#, "unknown message type 'nope'"),
            (#"{"type":"subscribe","payload":{}}"#, "'subscribe' needs a non-empty string 'id'"),
            (#"{"type":"subscribe","id":"a","payload":[]}"#, "'subscribe' needs an object 'payload'"),
        ] {
            guard case .invalid(let said) = ClientRequest(line: ByteBuffer(string: line), limits: limits) else {
                Issue.record("\(line) was read as a request")
                continue
            }
            #expect(said.hasPrefix(reason))
        }
    }
}
