import GraphQLTransportWS
import NIOCore
import Upstream

/// One upstream operation and the local subscribers that share it.
///
/// `@unchecked Sendable` — safe because only `Fanout` touches it, on the daemon's loop (its
/// handler closure captures it weakly and is called by the transport on that loop).
final class UpstreamEntry: @unchecked Sendable {
    struct Subscriber {
        let session: ClientSession
        let localID: String
        /// `{"type":"next","id":LOCAL_ID,"payload":` built once at subscribe.
        let prefix: ByteBuffer
    }

    /// Set for deduplicated subscriptions; nil for queries and mutations.
    let dedupKey: String?
    let kind: OperationKind
    var upstreamID = ""
    var subscribers: [Subscriber] = []
    var state: OperationState = .pending
    /// Sent over HTTP (`[upstream] http_url`) rather than the WebSocket.
    var overHTTP = false
    /// The pool's connection that carries it (nil over HTTP).
    var transport: UpstreamTransport?

    init(dedupKey: String?, kind: OperationKind) {
        self.dedupKey = dedupKey
        self.kind = kind
    }

    func remove(session: ClientSession, localID: String) {
        subscribers.removeAll { $0.session === session && $0.localID == localID }
    }
}
