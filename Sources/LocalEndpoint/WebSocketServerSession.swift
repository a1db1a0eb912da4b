import GQLMuxVocabulary
import HTTPFields
import JSONEnvelope
import LocalProtocol
import NIOCore

/// The endpoint's WebSocket subprotocols are the vocabulary's ``WireProtocol``: the same two
/// protocols, seen from the server's side.
extension WireProtocol {
    /// The subprotocol for a client's offer, in the client's order of preference.
    package static func select(offered: [String]) -> WireProtocol? {
        offered.lazy.compactMap { WireProtocol(rawValue: $0.trimming()) }.first
    }
}

/// The server side of a GraphQL WebSocket client: its frames become requests for the daemon's
/// session, and the session's messages (``SessionMessage``) become its frames. The pure core of
/// the endpoint's WebSocket wire (frames in, actions out; the clock is the caller's).
///
/// graphql-transport-ws, as a server: `connection_init` → `connection_ack`; no init within
/// the wait → 4408; a second init → 4429; a message that is not one → 4400; `subscribe` before
/// the ack → 4401; an id already in use → 4409; `ping` → `pong`. graphql-ws (legacy):
/// `connection_init` → `connection_ack` and `ka` keep-alives; `start`, `stop`,
/// `connection_terminate`; results as `data`. The client's `connection_init` payload is never
/// used: the daemon speaks upstream with its own credentials.
package struct WebSocketServerSession: Sendable {
    package enum Action: Equatable, Sendable {
        /// A text frame to the client.
        case send(ByteBuffer)
        /// The client subscribes: `payload` is its `subscribe` (`start`) message's object.
        case subscribe(id: String, payload: ByteBuffer)
        /// The client stops operation `id`.
        case complete(id: String)
        /// A close frame, then the connection ends.
        case close(code: CloseCode, reason: String)
    }

    package let wire: WireProtocol
    package private(set) var acknowledged = false
    /// The client's `connection_init` payload, once acknowledged (an object), for an upstream
    /// that carries each client's own credentials. When the client presented the endpoint's
    /// token in it, the members that carried it (`token`, `authorization`) are left out.
    package private(set) var initPayload: ByteBuffer?

    /// Lets go of the `connection_init` payload once it was handed on (it could be as large as
    /// a message: what is kept of it is the session's, bounded by `max_credential_bytes`).
    package mutating func forgetInitPayload() { initPayload = nil }
    /// The token the client must present in its `connection_init` payload before anything
    /// else (a TCP client whose upgrade carried none); nil when it need not.
    private let token: EndpointToken?
    /// Set when the client was refused for a missing or wrong token (the journal says so).
    package private(set) var deniedToken = false
    private var closed = false

    /// - Parameter acknowledged: the client's `connection_init` was answered already (by the
    ///   process before a restart): it is not asked again, and needs no token.
    package init(wire: WireProtocol, token: EndpointToken? = nil, acknowledged: Bool = false) {
        self.wire = wire
        self.token = acknowledged ? nil : token
        self.acknowledged = acknowledged
    }

    // MARK: - Client → daemon

    /// A text frame from the client.
    package mutating func received(_ text: ByteBuffer) -> [Action] {
        guard !closed else { return [] }
        guard let envelope = try? Envelope(text) else { return close(.badRequest, "Invalid message received") }
        switch (wire, envelope.type) {
        case (_, "connection_init"):
            if acknowledged {
                return wire == .transportWS ? close(.tooManyInitRequests, "Too many initialisation requests") : []
            }
            if let token, !token.accepts(initPayload: envelope.payloadKind == .object ? envelope.payload : nil) {
                return denyToken()
            }
            acknowledged = true
            if envelope.payloadKind == .object, let payload = envelope.payload {
                initPayload = token == nil ? payload : Self.without(["token", "authorization"], payload)
            }
            var actions: [Action] = [.send(ByteBuffer(string: #"{"type":"connection_ack"}"#))]
            if wire == .legacyWS { actions.append(.send(Self.keepAlive)) }
            return actions
        case (.transportWS, "ping"):
            return [.send(Self.message("pong", id: nil, payload: envelope.payloadKind == .object ? envelope.payload : nil))]
        case (.transportWS, "pong"):
            return []
        case (.transportWS, "subscribe"), (.legacyWS, "start"):
            guard acknowledged || (wire == .legacyWS && token == nil) else {
                return token == nil || wire == .transportWS ? close(.unauthorized, "Unauthorized") : denyToken()
            }
            guard let id = envelope.id, !id.isEmpty, let payload = envelope.payload, envelope.payloadKind == .object else {
                return close(.badRequest, "Invalid message received")
            }
            return [.subscribe(id: id, payload: payload)]
        case (.transportWS, "complete"), (.legacyWS, "stop"):
            guard let id = envelope.id, !id.isEmpty else { return close(.badRequest, "Invalid message received") }
            return [.complete(id: id)]
        case (.legacyWS, "connection_terminate"):
            return close(.normal, "")
        default:
            return close(.badRequest, "Invalid message received")
        }
    }

    /// `object` without the members named `names` (a valid JSON object: the envelope scanned it).
    static func without(_ names: Set<String>, _ object: ByteBuffer) -> ByteBuffer {
        guard let members = try? object.withUnsafeReadableBytes({ bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }) else { return object }
        guard members.contains(where: { names.contains($0.key) }) else { return object }
        var writer = JSONObjectWriter()
        for member in members where !names.contains(member.key) {
            writer.field(member.key, json: object.getSlice(at: object.readerIndex + member.range.lowerBound, length: member.range.count)!)
        }
        return writer.finish()
    }

    /// A binary frame: neither protocol has them.
    package mutating func receivedBinary() -> [Action] { close(.badRequest, "Invalid message received") }

    /// No `connection_init` within the wait.
    package mutating func initTimedOut() -> [Action] {
        guard !acknowledged, !closed else { return [] }
        return close(.initTimeout, "Connection initialisation timeout")
    }

    // MARK: - Daemon → client

    /// A message of the daemon's session, in this client's protocol. Results come framed on the
    /// hot path (``NextFraming``); a `next` here is one gqlmuxd gives itself (a replay, a
    /// snapshot), marked in its `extensions.gqlmux`.
    package mutating func deliver(_ message: SessionMessage) -> [Action] {
        guard !closed else { return [] }
        switch message {
        case .next(let id, let payload, let mark):
            let framing = NextFraming.webSocket(wire)
            var text = framing.prefix(id: id)
            var body = mark.map { ResultMarks.marked(payload, $0.name) } ?? payload
            text.writeBuffer(&body)
            text.writeStaticString(framing.suffix)
            return [.send(text)]
        case .complete(let id):
            return [.send(Self.message("complete", id: id, payload: nil))]
        case .error(nil, let error):
            return close(Self.closeCode(forConnectionError: error.code), error.message)
        case .error(let id?, let error):
            if error.code == .duplicateID, wire == .transportWS {
                return close(.subscriberAlreadyExists, "Subscriber for \(id) already exists")
            }
            return [.send(Self.message("error", id: id, payload: wire == .legacyWS ? error.firstError : error.errors))]
        case .connectionAck, .state, .pong, .ok, .status, .metrics, .table:
            return []  // the daemon's own vocabulary: this wire answers init and ping itself
        }
    }

    /// The close code for an error that ends the whole local connection.
    static func closeCode(forConnectionError code: LocalErrorCode?) -> CloseCode {
        switch code {
        case .slowConsumer?: .policyViolation  // it did not read fast enough
        case .shuttingDown?: .goingAway
        case .forbidden?: .forbidden
        case .limitExceeded?: .tryAgainLater  // max_clients
        case .badRequest?: .badRequest
        default: .internalError
        }
    }

    /// A missing or wrong token: 4403 (graphql-ws's "Forbidden"); the legacy protocol is told
    /// with `connection_error` first, as its clients expect.
    private mutating func denyToken() -> [Action] {
        deniedToken = true
        var actions: [Action] = []
        if wire == .legacyWS {
            actions.append(.send(ByteBuffer(string: #"{"type":"connection_error","payload":{"message":"Forbidden: a valid token is required"}}"#)))
        }
        return actions + close(.forbidden, "Forbidden")
    }

    /// A legacy keep-alive.
    package static let keepAlive = ByteBuffer(string: #"{"type":"ka"}"#)

    private mutating func close(_ code: CloseCode, _ reason: String) -> [Action] {
        closed = true
        return [.close(code: code, reason: String(reason.utf8.prefix(120)) ?? "")]
    }

    private static func message(_ type: String, id: String?, payload: ByteBuffer?) -> ByteBuffer {
        var writer = JSONObjectWriter()
        writer.field("type", type)
        if let id { writer.field("id", id) }
        if let payload { writer.field("payload", json: payload) }
        return writer.finish()
    }
}
