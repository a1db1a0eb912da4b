import GQLMuxVocabulary
import ResultDelivery

/// What the operator's view shows of one upstream operation beside what the core knows of it:
/// its results (counted once per run) and its outages. Made only once it has a result or an
/// outage, so an idle subscription costs nothing here. Pure: the caller passes the loop
/// clock's nanoseconds.
struct OperationStats {
    private(set) var results = 0
    private(set) var window = RateWindow()
    private(set) var lastResultAt: UInt64?
    /// Times its stream went down (`reconnecting` or `paused`), and for how long in all.
    private(set) var outages = 0
    private var downSince: UInt64?
    private var downTotal: UInt64 = 0

    /// A run of `count` results was written at `nanoseconds`.
    mutating func noteRun(_ count: Int, at nanoseconds: UInt64) {
        results &+= count
        window.add(count, second: Int64(nanoseconds / 1_000_000_000))
        lastResultAt = nanoseconds
    }

    /// Whether going to `state` is anything these figures keep: an outage starts or ends.
    static func counts(_ state: OperationState) -> Bool { state == .reconnecting || state == .paused }

    /// Its state is now `state`: an outage begins when it goes down and ends when it is active.
    mutating func stateChanged(to state: OperationState, at nanoseconds: UInt64) {
        switch state {
        case .reconnecting, .paused:
            guard downSince == nil else { return }
            downSince = nanoseconds
            outages += 1
        case .active:
            guard let since = downSince else { return }
            downTotal &+= nanoseconds &- min(since, nanoseconds)
            downSince = nil
        case .pending:
            break
        }
    }

    /// Time down in all as of `nanoseconds`, the outage under way included.
    func gap(at nanoseconds: UInt64) -> UInt64 {
        downTotal &+ (downSince.map { nanoseconds &- min($0, nanoseconds) } ?? 0)
    }
}
