import Synchronization

/// Who is told when the test upstream's counters change: called on the server's loop after
/// each change of ``TestUpstreamServer/currentStats``, so a test waits on a change instead of
/// polling the counters on a timer. (Not GQLMuxTestSupport's `Changes`: TestUpstream is linked
/// into the benchmark and the demo's server too, which must not depend on the test library.)
package final class StatsObservers: Sendable {
    private let observers = Mutex<(next: Int, all: [Int: @Sendable () -> Void])>((0, [:]))

    package init() {}

    /// Adds `observer`; returns the key that ``remove(_:)`` takes.
    package func add(_ observer: @escaping @Sendable () -> Void) -> Int {
        observers.withLock { observers in
            defer { observers.next += 1 }
            observers.all[observers.next] = observer
            return observers.next
        }
    }

    package func remove(_ key: Int) {
        _ = observers.withLock { $0.all.removeValue(forKey: key) }
    }

    /// The counters changed: tells every observer.
    func tell() {
        let all = observers.withLock { Array($0.all.values) }
        for observer in all { observer() }
    }
}
