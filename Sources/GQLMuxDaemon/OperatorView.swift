import GQLMuxVocabulary
import NIOCore

/// What the operator's view (`clients`, `operations`, `status`) keeps beside the parts it reads:
/// each connection's number, slow-consumer cuts per app, and each upstream lane's health (the
/// keep-alive ping's round trip, the gap between the server's keep-alives). Updated on the
/// daemon's loop by events that are rare next to results; nothing here is on the hot path.
final class OperatorView {
    private var nextNumber = 1
    /// Cuts per app: `uid/process` (at most ``cutKeys`` apps are told apart, at most
    /// ``cutKeysPerUID`` of one uid: the rest of its processes count together, so one user that
    /// names its processes at will cannot fill the table).
    private var cuts: [String: Int] = [:]
    private var cutKeysOfUID: [UInt32: Int] = [:]
    static let cutKeys = 1_024
    static let cutKeysPerUID = 16

    /// One lane's health.
    struct Health {
        /// When each connection's ping went out, until it is answered.
        var pingSentAt: [Int: UInt64] = [:]
        /// The last answered ping's round trip, and the last gap between two keep-alives.
        var roundTrip: Duration?
        var keepAliveGap: Duration?
        /// Each connection's last keep-alive (a pool's connections each send their own).
        var lastKeepAliveAt: [Int: UInt64] = [:]
        /// The last message of the server's own the lane had (keep-alive, ping, ack); its
        /// results are counted by the switchboard.
        var lastMessageAt: UInt64?
    }
    private(set) var health: [LaneID: Health] = [:]

    /// One operation's row as every asker shares it; each asker is shown `readers` or its own
    /// uid's count of them.
    struct OperationEntry {
        var id, upstream, identity, kind, label, state: String
        var readers: Int
        var readersByUID: [UInt32: Int]
        var results: Int
        var rate: Double
        var lastResultAge: Double?
        var outages: Int
        var gapSeconds: Double
        var startedAt: Double?
    }

    /// How long a table of the operations serves every question while the core does not change
    /// (ns): its figures are then at most this old.
    static let tableLife: UInt64 = 250_000_000
    private var operationTable: (madeAt: UInt64, changes: Int, entries: [OperationEntry])?

    /// The operations' table made at most ``tableLife`` before `now` with the core as it is
    /// (`changes`, ``Switchboard/changes``); made by `make` otherwise.
    func operations(now: UInt64, changes: Int, make: () -> [OperationEntry]) -> [OperationEntry] {
        if let table = operationTable, table.changes == changes, now >= table.madeAt, now - table.madeAt < Self.tableLife { return table.entries }
        let entries = make()
        operationTable = (now, changes, entries)
        return entries
    }

    /// A number for a new connection, unique in this process.
    func number() -> Int {
        defer { nextNumber += 1 }
        return nextNumber
    }

    private static func app(uid: UInt32?, process: String?) -> String { "\(uid.map(String.init) ?? "-")/\(process ?? "-")" }

    /// A client of `uid` and `process` was cut for falling behind.
    func cut(uid: UInt32?, process: String?) {
        let key = key(uid: uid, process: process)
        if cuts[key] == nil {
            guard cuts.count < Self.cutKeys else { return }
            if let uid { cutKeysOfUID[uid, default: 0] += 1 }
        }
        cuts[key, default: 0] += 1
    }

    /// Clients of that app cut so far.
    func cuts(uid: UInt32?, process: String?) -> Int { cuts[key(uid: uid, process: process)] ?? 0 }

    /// The app's key: past ``cutKeysPerUID`` names of one uid, that uid's other processes.
    private func key(uid: UInt32?, process: String?) -> String {
        let key = Self.app(uid: uid, process: process)
        guard let uid, cuts[key] == nil, cutKeysOfUID[uid, default: 0] >= Self.cutKeysPerUID else { return key }
        return Self.app(uid: uid, process: "(other processes)")
    }

    /// A transport event of `lane`'s connection `connection` at `now` (the loop's clock, ns):
    /// the round trip of a ping and its answer, a keep-alive's gap since that connection's last.
    /// Returns the round trip when a ping was answered (the caller records it in the metrics).
    func transportEvent(_ event: TransportEvent, lane: LaneID, connection: Int, now: UInt64) -> Duration? {
        switch event {
        case .ping(received: false):
            health[lane, default: Health()].pingSentAt[connection] = now
        case .pong(received: true):
            // Not a message of the server's own: a WebSocket library may answer while the
            // server hangs. Its round trip only.
            var entry = health[lane, default: Health()]
            defer { health[lane] = entry }
            guard let sent = entry.pingSentAt.removeValue(forKey: connection), now >= sent else { return nil }
            let roundTrip = Duration.nanoseconds(Int64(now - sent))
            entry.roundTrip = roundTrip
            return roundTrip
        case .keepAlive:
            var entry = health[lane, default: Health()]
            if let last = entry.lastKeepAliveAt[connection], now >= last { entry.keepAliveGap = .nanoseconds(Int64(now - last)) }
            entry.lastKeepAliveAt[connection] = now
            entry.lastMessageAt = now
            health[lane] = entry
        case .ping(received: true), .connected, .reconnected:
            health[lane, default: Health()].lastMessageAt = now
        case .disconnected:
            health[lane]?.pingSentAt[connection] = nil
            health[lane]?.lastKeepAliveAt[connection] = nil
        default:
            break
        }
        return nil
    }

    /// A lane closed: its health goes with it.
    func forget(_ lane: LaneID) { health[lane] = nil }
}
