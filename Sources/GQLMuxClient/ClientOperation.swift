import GraphQLTransportWS

/// One operation of a ``GQLMuxClient``; loop-confined.
final class ClientOperation: @unchecked Sendable {
    enum Kind: Equatable {
        case subscription
        case single
        case admin(String)
    }

    let kind: Kind
    /// The `subscribe` payload object as JSON text.
    let payload: String
    let onNext: @Sendable (GQLMuxResult) -> Void
    let onState: @Sendable (GQLMuxSubscriptionState) -> Void
    let onFinish: @Sendable ((any Error)?) -> Void

    init(
        kind: Kind,
        payload: String,
        onNext: @escaping @Sendable (GQLMuxResult) -> Void,
        onState: @escaping @Sendable (GQLMuxSubscriptionState) -> Void,
        onFinish: @escaping @Sendable ((any Error)?) -> Void
    ) {
        self.kind = kind
        self.payload = payload
        self.onNext = onNext
        self.onState = onState
        self.onFinish = onFinish
    }

    func line(id: String) -> String {
        switch kind {
        case .subscription, .single:
            return #"{"type":"subscribe","id":\#(jsonString(id)),"payload":\#(payload)}"# + "\n"
        case .admin(let verb):
            return #"{"type":"\#(verb)","id":\#(jsonString(id))}"# + "\n"
        }
    }
}
