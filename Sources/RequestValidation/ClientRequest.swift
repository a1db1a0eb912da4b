import JSONEnvelope
import LocalProtocol
import NIOCore

/// What a client asks of its session, whatever its wire: validated at the edge, once (a
/// `subscribe`'s document is parsed there under the limits in force), so the session reads
/// values and parses nothing.
package enum ClientRequest {
    /// A line client's `connection_init`, with the name it gave (`payload.client`), if any,
    /// and what it presents for upstreams with `identity = "client"` (`payload.upstream`).
    case connectionInit(clientName: String?, upstream: PresentedCredential? = nil)
    /// `subscribe`: the request, or why its payload was refused (answered for this id alone).
    case subscribe(id: String, Result<SubscribeRequest, SubscribeRequest.Invalid>)
    /// Stop operation `id`.
    case complete(id: String)
    case ping(payload: ByteBuffer?)
    case pong
    case status(id: String?)
    case metrics(id: String?)
    /// `clients` or `operations`: one row per client connection or upstream operation (an admin
    /// sees every row, another peer its own uid's).
    case table(Table, id: String?)
    /// `pause`, `resume`, `reload` or `restart`; `pause` and `resume` may name one upstream.
    case admin(AdminVerb, id: String?, upstream: String? = nil)
    /// Not a request of the protocol: answered with an error, and the connection ends.
    case invalid(reason: String)
    /// Input its wire could not take (a line over `max_line_bytes`, one the memory budget
    /// cannot hold): answered with an error of `code`, and the connection ends. `logged`: the
    /// journal's words for it, when it is the client's fault.
    case refused(LocalErrorCode, message: String, logged: String?)

    package enum Table: String, Sendable, CaseIterable {
        case clients, operations
    }

    package enum AdminVerb: String, Sendable, CaseIterable {
        case pause, resume, reload, restart
    }

    /// A `subscribe` of `payload`, parsed under `limits`.
    package static func subscribe(id: String, payload: ByteBuffer, limits: SubscribeRequest.Limits, upstream: String? = nil) -> ClientRequest {
        .subscribe(id: id, SubscribeRequest.parsed(payload, limits: limits).forUpstream(upstream))
    }

    /// One line of the local protocol (docs/protocol.md), without its `\n`.
    package init(line: ByteBuffer, limits: SubscribeRequest.Limits) {
        let envelope: Envelope
        do {
            envelope = try Envelope(line)
        } catch {
            self = .invalid(reason: "invalid message: \(error)")
            return
        }
        let payload = envelope.payloadKind == .object ? envelope.payload : nil
        guard let type = LocalMessageType(rawValue: envelope.type) else {
            self = .invalid(reason: "unknown message type '\(envelope.type)'")
            return
        }
        switch type {
        case .connectionInit:
            do {
                self = .connectionInit(
                    clientName: payload.flatMap(Self.clientName),
                    upstream: try payload.flatMap { payload throws(PresentedCredentialError) in try PresentedCredential(lineInit: payload) }
                )
            } catch {
                self = .invalid(reason: "connection_init: \(error.description)")
            }
        case .subscribe:
            guard let id = envelope.id, !id.isEmpty else {
                self = .invalid(reason: "'subscribe' needs a non-empty string 'id'")
                return
            }
            guard let payload else {
                self = .invalid(reason: "'subscribe' needs an object 'payload'")
                return
            }
            guard !envelope.upstreamMistyped else {
                self = .subscribe(id: id, .failure(SubscribeRequest.Invalid(code: .badRequest, message: "'upstream' must be a string naming an upstream")))
                return
            }
            self = .subscribe(id: id, payload: payload, limits: limits, upstream: envelope.upstream)
        case .complete:
            guard let id = envelope.id, !id.isEmpty else {
                self = .invalid(reason: "'complete' needs a non-empty string 'id'")
                return
            }
            self = .complete(id: id)
        case .ping:
            self = .ping(payload: envelope.payload)
        case .pong:
            self = .pong
        case .status:
            self = .status(id: envelope.id)
        case .metrics:
            self = .metrics(id: envelope.id)
        case .clients, .operations:
            self = .table(Table(rawValue: type.rawValue)!, id: envelope.id)
        case .pause, .resume, .reload, .restart:
            self = .admin(AdminVerb(rawValue: type.rawValue)!, id: envelope.id, upstream: envelope.upstream)
        case .connectionAck, .next, .error, .state, .ok:
            self = .invalid(reason: "'\(envelope.type)' is sent by the daemon, not to it")
        }
    }

    /// `payload.client` of a `connection_init`, at most 64 Unicode scalars (characters could
    /// carry any number of combining marks each).
    private static func clientName(_ payload: ByteBuffer) -> String? {
        guard let members = try? payload.withUnsafeReadableBytes({ bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }),
            let member = members.first(where: { $0.key == "client" && $0.kind == .string })
        else { return nil }
        let name = payload.withUnsafeReadableBytes { JSONScanner.decodeString($0, member.range) }
        return String(String.UnicodeScalarView(name.unicodeScalars.prefix(64)))
    }
}

extension SubscribeRequest {
    /// ``parse(_:limits:)`` as a value: the request, or why it was refused.
    package static func parsed(_ payload: ByteBuffer, limits: Limits) -> Result<SubscribeRequest, Invalid> {
        Result { () throws(Invalid) in try parse(payload, limits: limits) }
    }
}

extension Result where Success == SubscribeRequest {
    /// The request, for upstream `name` (nil: `default`); a refusal stays as it is.
    package func forUpstream(_ name: String?) -> Self {
        map { request in
            var request = request
            request.upstream = name
            return request
        }
    }
}
