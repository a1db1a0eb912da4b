import GQLMuxVocabulary
import JSONEnvelope
import Multiplexing
import NIOCore
import RequestValidation
import ResultDelivery
import SystemdSupport
import Upstream

/// The operator's view: `clients` and `operations`, one row per client connection and per
/// upstream operation (docs/protocol.md). An admin sees every row; any other peer the rows of
/// its own uid, and of an operation only its own readers.
extension Daemon {
    func table(_ table: ClientRequest.Table, for peer: PeerCredentials?) -> ByteBuffer {
        eventLoop.assertInEventLoop()
        let everyone = isAdmin(peer)
        let uid = peer?.uid
        let visible = { (session: ClientSession) in
            everyone || (uid != nil && session.arrival.listener != .endpointTCP && session.credentials?.uid == uid)
        }
        switch table {
        case .clients: return clientRows(sessions.values.filter(visible).sorted { $0.number < $1.number })
        case .operations: return operationRows(everyone: everyone, uid: uid)
        }
    }

    /// Each lane's keep-alive health now: its last message is the latest of its keep-alives,
    /// pings and acks and of its operations' results. One pass over the lanes, none over the
    /// operations. `identities`: the identity lanes' too (an admin asks: when another user's
    /// identity last had a result is theirs to know).
    func laneHealth(identities: Bool) -> [String: StatusReport.Health] {
        let now = NIODeadline.now().uptimeNanoseconds
        var table: [String: StatusReport.Health] = [:]
        for lane in upstreams.allLanes where identities || lane.identity == nil {
            let health = view.health[lane.id]
            let last = max(health?.lastMessageAt ?? 0, switchboard.lastResultOfLane[lane.id] ?? 0)
            table[StatusReport.healthKey(upstream: lane.upstream, identity: lane.identity)] = StatusReport.Health(
                pingRTT: health?.roundTrip.map(Self.seconds),
                keepAliveGap: health?.keepAliveGap.map(Self.seconds),
                lastMessageAge: last > 0 ? Double(now &- min(last, now)) / 1e9 : nil
            )
        }
        return table
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// `text` with every control character (C0, DEL, C1) as `?`: a process names itself and a
    /// client names itself, and neither may send escape sequences to an operator's terminal.
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isControl($0) ? "?" : $0 }))
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) }

    func slowConsumerCut(_ session: ClientSession) {
        view.cut(uid: session.credentials?.uid, process: session.process)
    }

    /// The upstream and identity (its short name, or `host`) of `lane`.
    private func names(of lane: LaneID) -> (upstream: String, identity: String) {
        let found = upstreams.lane(lane)
        return (found?.upstream ?? "?", found?.identity ?? "host")
    }

    private func clientRows(_ shown: [ClientSession]) -> ByteBuffer {
        let now = NIODeadline.now().uptimeNanoseconds
        return JSONObjectWriter.array(
            shown.map { session in
                { row in
                    let peer = session.credentials
                    row.field("id", session.number)
                    row.field("kind", session.kindName)
                    row.field("listener", session.arrival.listener.rawValue)
                    row.field("uid", count: peer.map { Int($0.uid) })
                    row.field("gid", count: peer.map { Int($0.gid) })
                    row.field("pid", count: peer.map { Int($0.pid) })
                    row.field("process", session.process.map(Self.printable))
                    row.field("name", Self.printable(session.name))
                    let held = self.switchboard.view(of: session)
                    let lanes = held.lanes.union(session.presentedCredentials.heldLanes).sorted { $0.value < $1.value }
                    row.field(
                        "upstreams",
                        objects: lanes.map { lane in
                            { entry in
                                let names = self.names(of: lane)
                                entry.field("upstream", names.upstream)
                                entry.field("identity", names.identity)
                            }
                        }
                    )
                    row.field("subscriptions", held.operations)
                    row.field("results", session.writer.resultsSent)
                    row.field("bytes", session.writer.bytesSent)
                    row.field("rate", number: session.writer.resultWindow.perSecond(at: now, since: session.openedAt))
                    row.field("byteRate", number: session.writer.byteWindow.perSecond(at: now, since: session.openedAt))
                    row.field("queuedBytes", session.unreadNow())
                    row.field("queuedPeakBytes", session.writer.peakQueued)
                    row.field("slowConsumerCuts", self.view.cuts(uid: peer?.uid, process: session.process))
                    row.field("connectedAt", number: Double(session.connectedAtMs) / 1_000)
                    row.field("restarts", session.restarts)
                }
            }
        )
    }

    /// The operations, from a table made at most every ``OperatorView/tableLife`` (one pass
    /// over every operation and its readers): any number of questions within it costs one pass,
    /// and each asker's share of it only the rows it may see.
    private func operationRows(everyone: Bool, uid: UInt32?) -> ByteBuffer {
        let now = NIODeadline.now().uptimeNanoseconds
        let table = view.operations(now: now, changes: switchboard.changes) { makeOperationTable(now: now) }
        var rows: [(inout JSONObjectWriter) -> Void] = []
        for entry in table {
            let shown = everyone ? entry.readers : (uid.flatMap { entry.readersByUID[$0] } ?? 0)
            guard everyone || shown > 0 else { continue }
            rows.append { row in
                row.field("id", entry.id)
                row.field("upstream", entry.upstream)
                row.field("identity", entry.identity)
                row.field("kind", entry.kind)
                row.field("operation", entry.label)
                row.field("state", entry.state)
                row.field("subscribers", shown)
                row.field("results", entry.results)
                row.field("rate", number: entry.rate)
                row.field("lastResultAge", number: entry.lastResultAge)
                row.field("outages", entry.outages)
                row.field("gapSeconds", number: entry.gapSeconds)
                row.field("startedAt", number: entry.startedAt)
            }
        }
        return JSONObjectWriter.array(rows)
    }

    private func makeOperationTable(now: UInt64) -> [OperatorView.OperationEntry] {
        switchboard.operationRows().map { summary, stats in
            var byUID: [UInt32: Int] = [:]
            for reader in summary.readers {
                guard let session = sessions[reader], session.arrival.listener != .endpointTCP, let uid = session.credentials?.uid else { continue }
                byUID[uid, default: 0] += 1
            }
            let names = names(of: summary.lane)
            let opened = switchboard.openedAtLoop(summary.id) ?? 0
            return OperatorView.OperationEntry(
                id: "\(summary.id)",
                upstream: names.upstream,
                identity: names.identity,
                kind: "\(summary.kind)",
                label: OperationLabel.of(summary.payload) ?? "\(summary.kind)",
                state: summary.state.rawValue,
                readers: summary.readers.count,
                readersByUID: byUID,
                results: stats?.results ?? 0,
                rate: stats.map { $0.window.perSecond(at: now, since: opened) } ?? 0,
                lastResultAge: stats?.lastResultAt.map { Double(now &- min($0, now)) / 1e9 },
                outages: stats?.outages ?? 0,
                gapSeconds: Double(stats?.gap(at: now) ?? 0) / 1e9,
                startedAt: switchboard.startedAt(summary.id)
            )
        }
    }
}
