import GQLMuxVocabulary
import HTTPFields
import Handover
import LocalEndpoint
import NIOCore
import NIOHTTP1
import RequestValidation

/// What the endpoint's handlers ask the control plane, on the daemon's loop: the access
/// settings as of now (a reload applies to every listener at once), the document limits, and
/// where to report a refusal.
package protocol EndpointHost: AnyObject {
    var endpointAccess: EndpointAccess { get }
    /// The token a TCP client must present; nil when `token_file` is not set.
    var endpointToken: EndpointToken? { get }
    var documentLimits: SubscribeRequest.Limits { get }
    /// Whether an upstream is named `name` (served at `path/NAME`).
    func servesUpstream(_ name: String) -> Bool
    /// Request headers some upstream forwards from its clients (lowercased; usually none).
    var forwardedHeaders: Set<String> { get }
    /// A request was refused: by the browser checks, the token check, or a timeout.
    func endpointRefused(_ refusal: EndpointRefusal, listener: ClientOrigin, fields: [String: String], message: String)
}

/// Which of the endpoint's wires a session writes to: each takes its own output.
package enum EndpointWire: Sendable {
    /// ``EndpointWebSocketHandler``: ``WebSocketOutput``.
    case webSocket
    /// ``EndpointHTTPHandler``: ``HTTPOutput``.
    case http
}

/// Why the endpoint refused a request or closed a connection on its own.
package enum EndpointRefusal: Sendable {
    /// The browser checks (Host, Origin, Sec-Fetch-Site) refused it.
    case requestRefused
    /// The TCP port's token was missing or wrong.
    case unauthorized
    /// A header, body or keep-alive timeout.
    case requestTimeout
}

/// The session behind one endpoint connection, as its handlers see it: a channel handler that
/// reads requests (``ClientRequest``) and writes what its wire takes (``WebSocketOutput``,
/// ``HTTPOutput``), told how to frame results.
package protocol EndpointSession: AnyObject, ChannelHandler {
    /// How results reach the client: set before each subscribe.
    var framing: NextFraming { get set }
    /// The connection's share of the memory budget for what it has not finished sending.
    var inbound: (any InboundBudget)? { get set }
    /// The handler that owns the connection's wire, as the online restart asks it
    /// (``CarriedConnection``): set by whoever builds the session's pipeline.
    var wire: (any CarriedConnection)? { get set }
    /// What the client presents for upstreams with `identity = "client"`.
    var presented: PresentedCredential { get }
    /// Replaces what the client presents (bounded and kept only where an upstream uses it).
    func present(_ credential: PresentedCredential)
    /// Adds a WebSocket's `connection_init` payload to the headers its upgrade presented; when
    /// those were refused, the refusal stands (the app never becomes a payload-only identity).
    func presentPayload(_ payload: [UInt8]?)
}

/// Where a request target falls on the endpoint: `path` is the default upstream, `path/NAME`
/// upstream NAME; anything else is not the endpoint.
package enum EndpointTarget: Equatable {
    case upstream(String?)
    case elsewhere

    package init(_ target: Substring, path: String) {
        if target == path {
            self = .upstream(nil)
        } else if target.hasPrefix(path + "/") {
            let name = target.dropFirst(path.count + 1)
            self = name.isEmpty ? .elsewhere : .upstream(String(name))
        } else {
            self = .elsewhere
        }
    }
}

extension EndpointHost {
    /// The upstream a request target names: `.some(nil)` the default, `.some(name)` a
    /// configured one; nil: not the endpoint, or no such upstream (404).
    func upstream(target: Substring, path: String) -> String?? {
        switch EndpointTarget(target, path: path) {
        case .elsewhere: return nil
        case .upstream(nil): return .some(nil)
        case .upstream(let name?): return servesUpstream(name) ? .some(name) : nil
        }
    }

    /// The headers of `headers` that some upstream forwards from its clients (only those a
    /// header may carry upstream: ``PresentedCredential/isValidHeader(name:value:)``).
    func presentedHeaders(_ headers: HTTPHeaders) -> [PresentedCredential.Header] {
        let forwarded = forwardedHeaders
        guard !forwarded.isEmpty else { return [] }
        return headers.compactMap { header in
            forwarded.contains(header.name.lowercased()) && PresentedCredential.isValidHeader(name: header.name, value: header.value)
                ? PresentedCredential.Header(name: header.name, value: header.value) : nil
        }
    }
}

/// What ``EndpointPipeline`` asks the control plane besides what the handlers ask: a session
/// for a connection, a share of the memory budget, and the settings a pipeline is built with.
package protocol EndpointConnectionHost: EndpointHost {
    /// The sessions it makes: what ``EndpointPipeline/configure(_:origin:arrival:host:)`` hands
    /// back for a carried connection, as the host's own type.
    associatedtype Session: EndpointSession
    /// A session for `channel`, wired to the data plane, writing what `wire` takes; added to
    /// the pipeline by the caller.
    func endpointSession(_ channel: any Channel, origin: ClientOrigin, wire: EndpointWire) -> Session
    /// A new connection's share of the memory budget (released when it closes).
    func makeInboundBudget() -> any InboundBudget
    /// `[graphql_endpoint] path`.
    var endpointPath: String { get }
    /// `[limits] max_line_bytes`: the largest request body or WebSocket message.
    var maxMessageBytes: Int { get }
}

/// A connection's share of the memory budget for what it has not finished sending: its reader
/// says how many such bytes it holds now; the budget grants or refuses, and may cut the
/// connection to make room for a smaller request (``onCut``).
package protocol InboundBudget: AnyObject {
    /// Bytes of unfinished requests held now.
    var held: Int { get }
    /// The connection now holds `bytes` of unfinished requests; false when that does not fit
    /// (nothing is reserved then).
    func hold(_ bytes: Int) -> Bool
    /// The connection holds nothing any more.
    func release()
    /// Answers the connection's request with an error and closes it; set by its reader.
    var onCut: () -> Void { get set }
}
