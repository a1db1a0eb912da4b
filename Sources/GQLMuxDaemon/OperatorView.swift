import GQLMuxVocabulary
import NIOCore

/// What the operator's view (`clients`, `operations`, `status`) keeps beside the parts it reads:
/// each connection's number, slow-consumer cuts per app, and each upstream lane's health (the
/// keep-alive ping's round trip, the gap between the server's keep-alives). Updated on the
/// daemon's loop by events that are rare next to results; nothing here is on the hot path.
final class OperatorView {
    private var nextNumber = 1
    /// Cuts per app: `uid/process` (at most ``cutKeys`` apps are told apart).
    private var cuts: [String: Int] = [:]
    static let cutKeys = 1_024

    /// One lane's health.
    struct Health {
        /// When each connection's ping went out, until it is answered.
        var pingSentAt: [Int: UInt64] = [:]
        /// The last answered ping's round trip, and the last gap between two keep-alives.
        var roundTrip: Duration?
        var keepAliveGap: Duration?
        var lastKeepAliveAt: UInt64?
        /// The last message of any kind the lane is known to have had (pong, keep-alive, ack).
        var lastMessageAt: UInt64?
    }
    private(set) var health: [LaneID: Health] = [:]

    /// A number for a new connection, unique in this process.
    func number() -> Int {
        defer { nextNumber += 1 }
        return nextNumber
    }

    private static func app(uid: UInt32?, process: String?) -> String { "\(uid.map(String.init) ?? "-")/\(process ?? "-")" }

    /// A client of `uid` and `process` was cut for falling behind.
    func cut(uid: UInt32?, process: String?) {
        let key = Self.app(uid: uid, process: process)
        guard cuts[key] != nil || cuts.count < Self.cutKeys else { return }
        cuts[key, default: 0] += 1
    }

    /// Clients of that app cut so far.
    func cuts(uid: UInt32?, process: String?) -> Int { cuts[Self.app(uid: uid, process: process)] ?? 0 }

    /// A transport event of `lane`'s connection `connection` at `now` (the loop's clock, ns):
    /// the round trip of a ping and its answer (the histogram is told), a keep-alive's gap.
    /// Returns the round trip when a ping was answered.
    func transportEvent(_ event: TransportEvent, lane: LaneID, connection: Int, now: UInt64) -> Duration? {
        switch event {
        case .ping(received: false):
            health[lane, default: Health()].pingSentAt[connection] = now
        case .pong(received: true):
            var entry = health[lane, default: Health()]
            entry.lastMessageAt = now
            defer { health[lane] = entry }
            guard let sent = entry.pingSentAt.removeValue(forKey: connection), now >= sent else { return nil }
            let roundTrip = Duration.nanoseconds(Int64(now - sent))
            entry.roundTrip = roundTrip
            return roundTrip
        case .keepAlive:
            var entry = health[lane, default: Health()]
            if let last = entry.lastKeepAliveAt, now >= last { entry.keepAliveGap = .nanoseconds(Int64(now - last)) }
            entry.lastKeepAliveAt = now
            entry.lastMessageAt = now
            health[lane] = entry
        case .ping(received: true), .connected, .reconnected:
            health[lane, default: Health()].lastMessageAt = now
        case .disconnected:
            health[lane]?.pingSentAt[connection] = nil
            health[lane]?.lastKeepAliveAt = nil
        default:
            break
        }
        return nil
    }

    /// A lane closed: its health goes with it.
    func forget(_ lane: LaneID) { health[lane] = nil }
}
