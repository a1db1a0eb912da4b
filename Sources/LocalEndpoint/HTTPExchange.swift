import GQLMuxVocabulary
import JSONEnvelope
import LocalProtocol
import NIOCore

/// One GraphQL-over-HTTP request to the endpoint: the request object for the daemon's session,
/// and its answer from the session's messages (``SessionMessage``): a JSON response (queries,
/// mutations), or a stream (`Accept: text/event-stream` as graphql-sse distinct connections
/// mode; `Accept: multipart/mixed` as Apollo multipart subscriptions). A stream's results
/// come framed on the hot path (``NextFraming``). Pure: messages in, response parts out.
package struct HTTPExchange: Sendable {
    package enum Mode: Equatable, Sendable {
        /// One JSON answer, `application/graphql-response+json` or `application/json`.
        case json(contentType: String)
        case sse
        case multipart
    }

    /// What goes to the HTTP client.
    package enum Output: Equatable, Sendable {
        case head(status: Int, contentType: String)
        case body(ByteBuffer)
        case end
    }

    /// How a request starts: refused at once, or subscribed (`request`: the GraphQL request
    /// object, a `subscribe`'s payload) with its answer's mode.
    package enum Start: Sendable {
        case reject(status: Int, message: String)
        case subscribe(request: ByteBuffer, exchange: HTTPExchange)
    }

    package let mode: Mode
    package let id: String
    private var result: ByteBuffer?
    private var headSent = false
    package private(set) var ended = false

    private init(mode: Mode, id: String) {
        self.mode = mode
        self.id = id
    }

    /// A stream whose head and opening were sent by the process before a restart: it goes on
    /// from its next result. Nil for a JSON answer, which is never carried over.
    package init?(resuming mode: Mode, id: String) {
        guard mode == .sse || mode == .multipart else { return nil }
        self.init(mode: mode, id: id)
        headSent = true
    }

    package static let multipartContentType = #"multipart/mixed;boundary="graphql";subscriptionSpec=1.0"#

    /// Reads a request. `request` is the JSON object of a POST body, or nil for a GET, whose
    /// `query`, `variables`, `operationName` and `extensions` come from `queryItems`.
    /// - Parameter kindOf: the operation's kind, nil when the document does not parse (or
    ///   exceeds the limits). GET runs only a query that parses (fail closed: a GET can be
    ///   sent by any page, an `<img>` tag); a subscription needs a stream.
    package static func start(
        method: String,
        accept: String,
        contentType: String?,
        body: ByteBuffer?,
        queryItems: [(String, String)],
        id: String,
        kindOf: (ByteBuffer) -> OperationKind?
    ) -> Start {
        let request: ByteBuffer
        switch method {
        case "POST":
            guard let contentType, MediaType(contentType).map({ $0.isJSON && $0.isUTF8 }) == true else {
                return .reject(status: 415, message: "POST needs Content-Type: application/json")
            }
            guard let body, (try? body.withUnsafeReadableBytes { try JSONScanner.scanObject($0) }) != nil else {
                return .reject(status: 400, message: "the body is not a JSON object")
            }
            request = body
        case "GET":
            guard let built = getRequest(queryItems) else {
                return .reject(status: 400, message: "GET needs a 'query' parameter; 'variables' and 'extensions' must be JSON objects")
            }
            request = built
        default:
            return .reject(status: 405, message: "use POST, or GET for queries")
        }
        let kind = kindOf(request)
        if method == "GET", kind != .query {
            return .reject(status: 405, message: kind == nil ? "GET runs only a query that parses" : "GET runs only queries; use POST")
        }
        let wanted = MediaType.list(accept).map(\.essence)
        let mode: Mode
        if wanted.contains("text/event-stream") {
            mode = .sse
        } else if wanted.contains("multipart/mixed") {
            mode = .multipart
        } else if kind == .subscription {
            return .reject(status: 406, message: "a subscription needs Accept: text/event-stream or multipart/mixed;subscriptionSpec=1.0")
        } else if wanted.contains("application/graphql-response+json") {
            mode = .json(contentType: "application/graphql-response+json; charset=utf-8")
        } else if wanted.isEmpty || wanted.contains("application/json") || wanted.contains("*/*") || wanted.contains("application/*") {
            // GraphQL over HTTP: a client that names no type, or accepts anything, SHOULD get
            // `application/json`, the type every existing client reads.
            mode = .json(contentType: "application/json; charset=utf-8")
        } else {
            mode = .json(contentType: "application/graphql-response+json; charset=utf-8")
        }
        return .subscribe(request: request, exchange: HTTPExchange(mode: mode, id: id))
    }

    /// How the session frames this exchange's results: once, as the stream's own events (SSE,
    /// multipart); a JSON answer's come as values and are assembled here.
    package var framing: NextFraming {
        switch mode {
        case .sse: .sse
        case .multipart: .multipart
        case .json: .answer(id: id)
        }
    }

    /// What to send at once: a stream's head (and multipart's first delimiter and heartbeat).
    package mutating func opening() -> [Output] {
        switch mode {
        case .json: return []
        case .sse:
            headSent = true
            return [.head(status: 200, contentType: "text/event-stream"), .body(ByteBuffer(string: ":\n\n"))]
        case .multipart:
            headSent = true
            return [.head(status: 200, contentType: Self.multipartContentType), .body(ByteBuffer(string: "\r\n--graphql" + Self.part("{}")))]
        }
    }

    /// A keep-alive for a stream (multipart every 5 s, SSE every 12 s); nil for JSON.
    package var heartbeat: ByteBuffer? {
        guard !ended else { return nil }
        switch mode {
        case .json: return nil
        case .sse: return ByteBuffer(string: ":\n\n")
        case .multipart: return ByteBuffer(string: Self.part("{}"))
        }
    }

    /// A message of the daemon's session, for this exchange's answer. A message about another
    /// operation (the one before, on the same connection) is not this answer's.
    package mutating func deliver(_ message: SessionMessage) -> [Output] {
        guard !ended else { return [] }
        switch message {
        case .next(let id, let payload, let mark) where id == self.id:
            return next(mark.map { ResultMarks.marked(payload, $0.name) } ?? payload)
        case .complete(let id) where id == self.id:
            return finish(errors: nil, status: 200)
        case .error(let id, let error) where id == nil || id == self.id:
            return finish(errors: error.errors, status: Self.status(for: error.code, mode: mode))
        default:
            return []
        }
    }

    private mutating func next(_ payload: ByteBuffer) -> [Output] {
        switch mode {
        case .json:
            if result == nil { result = payload }
            return []
        case .sse, .multipart:
            return [.body(Self.framed(payload, framing))]
        }
    }

    /// `payload` as a result of a stream, framed as the hot path frames it.
    private static func framed(_ payload: ByteBuffer, _ framing: NextFraming) -> ByteBuffer {
        var out = framing.prefix(id: "")
        var payload = payload
        out.writeBuffer(&payload)
        out.writeStaticString(framing.suffix)
        return out
    }

    private mutating func finish(errors: ByteBuffer?, status: Int) -> [Output] {
        ended = true
        switch mode {
        case .json(let contentType):
            let body: ByteBuffer
            if let errors {
                body = ByteBuffer(string: #"{"errors":"#) + errors + ByteBuffer(string: "}")
            } else {
                body = result ?? ByteBuffer(string: #"{"data":null}"#)
            }
            return [.head(status: errors == nil ? 200 : status, contentType: contentType), .body(body), .end]
        case .sse:
            var outputs: [Output] = []
            if let errors { outputs.append(.body(Self.framed(ByteBuffer(string: #"{"errors":"#) + errors + ByteBuffer(string: "}"), .sse))) }
            outputs += [.body(ByteBuffer(string: "event: complete\ndata:\n\n")), .end]
            return outputs
        case .multipart:
            var outputs: [Output] = []
            if let errors {
                outputs.append(
                    .body(
                        ByteBuffer(string: "\r\ncontent-type: application/json\r\n\r\n{\"payload\":null,\"errors\":") + errors
                            + ByteBuffer(string: "}\r\n--graphql")
                    )
                )
            }
            outputs += [.body(ByteBuffer(string: "--\r\n")), .end]
            return outputs
        }
    }

    /// The HTTP status of an error answer (GraphQL over HTTP: a document that fails, whether
    /// the server or gqlmuxd rejects it, is 400 with `application/graphql-response+json` and 200
    /// with `application/json`; a request that is not well-formed is 400 with either).
    static func status(for code: LocalErrorCode?, mode: Mode) -> Int {
        let plainJSON = if case .json("application/json; charset=utf-8") = mode { true } else { false }
        switch code {
        case nil, .invalidDocument?: return plainJSON ? 200 : 400
        case .badRequest?, .duplicateID?: return 400
        case .forbidden?: return 403
        case .unknownUpstream?: return 404
        case .limitExceeded?: return 429
        case .connectionLost?, .upstreamClosed?: return 502
        case .shuttingDown?, .slowConsumer?: return 503
        }
    }

    private static func part(_ json: String) -> String { "\r\ncontent-type: application/json\r\n\r\n\(json)\r\n--graphql" }

    /// `query`, `variables`, `operationName`, `extensions` of a GET as a request object.
    static func getRequest(_ items: [(String, String)]) -> ByteBuffer? {
        var writer = JSONObjectWriter()
        var hasQuery = false
        for (name, value) in items {
            switch name {
            case "query":
                writer.field("query", value)
                hasQuery = true
            case "operationName":
                writer.field("operationName", value)
            case "variables", "extensions":
                let json = ByteBuffer(string: value)
                guard (try? json.withUnsafeReadableBytes { try JSONScanner.scanObject($0) }) != nil else { return nil }
                writer.field(name, json: json)
            default:
                continue
            }
        }
        return hasQuery ? writer.finish() : nil
    }

    /// Splits and percent-decodes a URL query (`a=1&b=%7B%7D`, `+` as space).
    package static func queryItems(_ query: Substring) -> [(String, String)] {
        query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (percentDecode(parts[0]), parts.count > 1 ? percentDecode(parts[1]) : "")
        }
    }

    static func percentDecode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var index = text.utf8.startIndex
        let utf8 = text.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%"), let high = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex), high < utf8.endIndex,
                let low = utf8.index(high, offsetBy: 1, limitedBy: utf8.endIndex), low < utf8.endIndex,
                let value = UInt8(String(decoding: [utf8[high], utf8[low]], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                index = utf8.index(after: low)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
                index = utf8.index(after: index)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension ByteBuffer {
    fileprivate static func + (lhs: ByteBuffer, rhs: ByteBuffer) -> ByteBuffer {
        var out = lhs
        var rhs = rhs
        out.writeBuffer(&rhs)
        return out
    }
}
