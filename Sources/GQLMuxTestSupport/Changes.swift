import Synchronization
import Testing

/// What a test waits on without polling: the owner of some state (a test client's lines, an
/// event log, a test server's counters) calls ``changed()`` whenever that state changes, and
/// ``until(_:within:sourceLocation:_:)`` checks its condition once at the start and again at
/// each change, never on a timer; it records an issue if the condition does not hold within
/// the time allowed.
package final class Changes: Sendable {
    private let waiters = Mutex<(next: Int, all: [Int: AsyncStream<Void>.Continuation])>((0, [:]))
    /// Signals told of every change of this one (a wait on several sources), held weakly.
    private let followers = Mutex<[WeakChanges]>([])

    package init() {}

    /// The state changed: every waiter checks its condition again.
    package func changed() {
        let all = waiters.withLock { Array($0.all.values) }
        for waiter in all { waiter.yield() }
        let followers = followers.withLock { list in
            list.removeAll { $0.changes == nil }
            return list.compactMap(\.changes)
        }
        for follower in followers { follower.changed() }
    }

    /// From now on, `other` changes whenever this does (while `other` lives).
    fileprivate func forward(to other: Changes) {
        followers.withLock { $0.append(WeakChanges(changes: other)) }
    }

    /// Returns once `condition` holds, checked now and after each change; after `seconds`
    /// without it, records an issue (as a failed expectation, at the caller) and returns.
    package func until(
        _ what: String,
        within seconds: Double = 10,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: () async -> Bool
    ) async {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let key = waiters.withLock { waiters in
            defer { waiters.next += 1 }
            waiters.all[waiters.next] = continuation
            return waiters.next
        }
        defer { _ = waiters.withLock { $0.all.removeValue(forKey: key) } }
        let deadline = Task {
            try? await Task.sleep(for: .seconds(seconds))
            continuation.finish()
        }
        defer { deadline.cancel() }
        if await condition() { return }
        for await _ in stream {
            if await condition() { return }
        }
        if await condition() { return }
        Issue.record("timed out after \(seconds)s waiting for: \(what)", sourceLocation: sourceLocation)
    }
}

/// A test helper whose state tests wait on (a client's lines, an event log, a recorder): it
/// calls `changes.changed()` at every change.
package protocol Changing: Sendable {
    var changes: Changes { get }
}

/// Returns once `condition` holds: checked now and again whenever one of `sources` changes
/// (never on a timer); records an issue at the caller after `seconds` without it. The condition
/// must read only what `sources` hold (and values that do not change).
package func until(
    _ what: String,
    within seconds: Double = 10,
    on sources: any Changing...,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let changes = sources.count == 1 ? sources[0].changes : Changes.merging(sources.map(\.changes))
    await changes.until(what, within: seconds, sourceLocation: sourceLocation, condition)
}

extension Changes {
    /// A signal that changes whenever any of `all` does (for the length of a wait).
    static func merging(_ all: [Changes]) -> Changes {
        let merged = Changes()
        for source in all { source.forward(to: merged) }
        return merged
    }
}

private struct WeakChanges: Sendable {
    weak var changes: Changes?
}
