import NIOConcurrencyHelpers

/// The bounded buffer between the connection (which pushes results on its event loop) and the
/// task iterating a subscription.
///
/// States: open (filling / full) → finished (results still drained, then the end or the error)
/// or cancelled. It reports crossing `capacity` (full) and falling back to half of it (drained),
/// so the client stops reading its socket while any subscription is full: then the daemon's
/// `client_buffer_bytes` decides, and the app's memory stays bounded. Continuations are resumed
/// outside the lock.
final class ResultBuffer: Sendable {
    private struct State {
        var items: [GQLMuxResult] = []
        var head = 0
        var full = false
        var finished = false
        var error: (any Error)?
        var waiter: CheckedContinuation<GQLMuxResult?, any Error>?
        var count: Int { items.count - head }
    }

    private enum Next {
        case item(GQLMuxResult, drained: Bool)
        case end((any Error)?)
        case wait
    }

    let capacity: Int
    private let state = NIOLockedValueBox(State())
    /// Called with true when the buffer reaches `capacity`, false when it drains to half.
    private let onPressure: @Sendable (Bool) -> Void

    init(capacity: Int, onPressure: @escaping @Sendable (Bool) -> Void) {
        self.capacity = max(1, capacity)
        self.onPressure = onPressure
    }

    /// Results waiting for the consumer.
    var count: Int { state.withLockedValue { $0.count } }

    /// A consumer is waiting for the next result (for tests).
    var hasWaiter: Bool { state.withLockedValue { $0.waiter != nil } }

    /// Adds a result (from the connection's loop). Results after the end are dropped.
    func push(_ result: GQLMuxResult) {
        let (waiter, becameFull) = state.withLockedValue { s -> (CheckedContinuation<GQLMuxResult?, any Error>?, Bool) in
            guard !s.finished else { return (nil, false) }
            if let waiter = s.waiter {
                s.waiter = nil
                return (waiter, false)
            }
            s.items.append(result)
            guard !s.full, s.count >= capacity else { return (nil, false) }
            s.full = true
            return (nil, true)
        }
        waiter?.resume(returning: result)
        if becameFull { onPressure(true) }
    }

    /// Ends the sequence after the buffered results: normally (nil) or with `error`.
    func finish(_ error: (any Error)?) {
        let waiter = state.withLockedValue { s -> CheckedContinuation<GQLMuxResult?, any Error>? in
            guard !s.finished else { return nil }
            s.finished = true
            s.error = error
            let waiter = s.waiter
            s.waiter = nil
            if waiter != nil { s.error = nil }  // a waiter means nothing is buffered: it gets the end now
            return waiter
        }
        guard let waiter else { return }
        if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: nil) }
    }

    /// Ends at once, dropping buffered results (the consumer stopped).
    func cancel() {
        let (waiter, wasFull) = state.withLockedValue { s -> (CheckedContinuation<GQLMuxResult?, any Error>?, Bool) in
            let waiter = s.waiter
            let wasFull = s.full
            s = State()
            s.finished = true
            return (waiter, wasFull)
        }
        waiter?.resume(returning: nil)
        if wasFull { onPressure(false) }
    }

    /// The next result, nil at the end; throws the error the sequence ended with.
    /// - Parameter onCancel: called when the iterating task is cancelled.
    func next(onCancel: @escaping @Sendable () -> Void) async throws -> GQLMuxResult? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let popped = state.withLockedValue { s in
                    let popped = Self.pop(&s, capacity: capacity)
                    if popped == nil { s.waiter = continuation }
                    return popped
                }
                guard let popped else { return }
                continuation.resume(with: popped.result)
                if popped.drained { onPressure(false) }
            }
        } onCancel: {
            self.cancel()
            onCancel()
        }
    }

    /// One step of the consumer: an item, the end, or nothing yet (nil).
    private static func pop(_ s: inout State, capacity: Int) -> (result: Result<GQLMuxResult?, any Error>, drained: Bool)? {
        if s.count > 0 {
            let item = s.items[s.head]
            s.head += 1
            if s.head >= 1_024, s.head * 2 >= s.items.count {
                s.items.removeFirst(s.head)
                s.head = 0
            }
            var drained = false
            if s.full, s.count <= capacity / 2 {
                s.full = false
                drained = true
            }
            return (.success(item), drained)
        }
        guard s.finished else { return nil }
        if let error = s.error {
            s.error = nil
            return (.failure(error), false)
        }
        return (.success(nil), false)
    }
}
