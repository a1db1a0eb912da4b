import LocalProtocol
import NIOCore

/// One operation of a ``GQLMuxClient``. `@unchecked Sendable` — safe because it is created,
/// read and finished on the client's event loop only.
final class ClientOperation: @unchecked Sendable {
    enum Kind: Equatable {
        case subscription
        case single
        case admin(LocalMessageType)
    }

    let kind: Kind
    /// The `subscribe` payload object as JSON text.
    let payload: String
    /// The upstream it is for, by name (nil: `default`).
    let upstream: String?
    let onNext: @Sendable (GQLMuxResult) -> Void
    /// A new state; an `active` after an outage comes with how long the stream was down.
    let onState: @Sendable (GQLMuxSubscriptionState, Duration?) -> Void
    let onFinish: @Sendable ((any Error)?) -> Void

    init(
        kind: Kind,
        payload: String,
        upstream: String? = nil,
        onNext: @escaping @Sendable (GQLMuxResult) -> Void,
        onState: @escaping @Sendable (GQLMuxSubscriptionState, Duration?) -> Void,
        onFinish: @escaping @Sendable ((any Error)?) -> Void
    ) {
        self.kind = kind
        self.payload = payload
        self.upstream = upstream
        self.onNext = onNext
        self.onState = onState
        self.onFinish = onFinish
    }

    /// The request line: `subscribe` with the payload, or the admin verb.
    func line(id: String) -> ByteBuffer {
        switch kind {
        case .subscription, .single:
            return LocalEncode.envelope(.subscribe, id: id, payload: ByteBuffer(string: payload), upstream: upstream)
        case .admin(let verb):
            return LocalEncode.envelope(verb, id: id, upstream: upstream)
        }
    }
}
