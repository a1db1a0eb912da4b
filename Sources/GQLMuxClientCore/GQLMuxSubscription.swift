import NIOConcurrencyHelpers

/// A live subscription: iterate it for results; `state` tells whether events may have been
/// missed (`reconnecting`) or flow (`active`). Cancelling the iterating task, ``cancel()``, or
/// dropping both the subscription and its iterator completes it at the daemon.
///
/// Results wait in a bounded buffer (``GQLMuxClient/Configuration/bufferedResults``). While it
/// is full the client stops reading from gqlmuxd, so a slow app never grows in memory; if it
/// stays behind for longer than the daemon's `client_buffer_bytes` allows, the daemon cuts the
/// connection and iteration throws ``GQLMuxError/slowConsumer``.
public final class GQLMuxSubscription: AsyncSequence, Sendable {
    /// Each element is one `next` result of the subscription.
    public typealias Element = GQLMuxResult

    /// Iterates the subscription's results; ends when the server completes it, throws its error.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// Held so the subscription lives as long as anyone iterates it.
        let subscription: GQLMuxSubscription

        /// The next result; nil once completed; throws ``GQLMuxError`` when it ends with an error.
        public mutating func next() async throws -> GQLMuxResult? {
            try await subscription.buffer.next(onCancel: subscription.onCancel)
        }
    }

    let buffer: ResultBuffer
    private let stateBox: NIOLockedValueBox<GQLMuxSubscriptionState>
    private let gapBox: NIOLockedValueBox<Duration?>
    private let onCancel: @Sendable () -> Void

    init(
        buffer: ResultBuffer,
        stateBox: NIOLockedValueBox<GQLMuxSubscriptionState>,
        gapBox: NIOLockedValueBox<Duration?>,
        onCancel: @escaping @Sendable () -> Void
    ) {
        self.buffer = buffer
        self.stateBox = stateBox
        self.gapBox = gapBox
        self.onCancel = onCancel
    }

    deinit { onCancel() }

    /// The latest lifecycle state.
    public var state: GQLMuxSubscriptionState { stateBox.withLockedValue { $0 } }

    /// How long the shared stream was down before its last resume (the daemon's `gapMs`): events
    /// the server sent meanwhile are gone. Nil until the stream has resumed from an outage.
    public var lastGap: Duration? { gapBox.withLockedValue { $0 } }

    /// Results received and not yet iterated (at most about ``GQLMuxClient/Configuration/bufferedResults``).
    public var bufferedCount: Int { buffer.count }

    /// An iterator over the results (one iteration per subscription).
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(subscription: self) }

    /// Stops the subscription; iteration ends normally.
    public func cancel() {
        buffer.cancel()
        onCancel()
    }
}
