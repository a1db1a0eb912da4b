import NIOConcurrencyHelpers

/// A live subscription: iterate it for results; `state` tells whether events may have been
/// missed (`reconnecting`) or flow (`active`). Cancelling the iterating task, or ``cancel()``,
/// completes it at the daemon.
public final class GQLMuxSubscription: AsyncSequence, Sendable {
    public typealias Element = GQLMuxResult
    public typealias AsyncIterator = AsyncThrowingStream<GQLMuxResult, any Error>.Iterator

    private let stream: AsyncThrowingStream<GQLMuxResult, any Error>
    private let stateBox: NIOLockedValueBox<GQLMuxSubscriptionState>
    private let onCancel: @Sendable () -> Void

    init(
        stream: AsyncThrowingStream<GQLMuxResult, any Error>,
        stateBox: NIOLockedValueBox<GQLMuxSubscriptionState>,
        onCancel: @escaping @Sendable () -> Void
    ) {
        self.stream = stream
        self.stateBox = stateBox
        self.onCancel = onCancel
    }

    /// The latest lifecycle state.
    public var state: GQLMuxSubscriptionState { stateBox.withLockedValue { $0 } }

    public func makeAsyncIterator() -> AsyncIterator { stream.makeAsyncIterator() }

    /// Stops the subscription; iteration ends normally.
    public func cancel() { onCancel() }
}
