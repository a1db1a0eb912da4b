import GQLMuxVocabulary
import GraphQLTransportWS

/// The upstream carriers' transport events as the journal and the metrics record them: one
/// journal event each (with `GQLMUX_CONNECTION=`, the pool connection's index), reconnects
/// counted by cause, and the time from a lost connection to the next acknowledged one.
struct UpstreamEventLog {
    let events: DaemonEvents
    let metrics: DaemonMetrics

    /// Records `event` of pool connection `connection`; `context` is where it was connected
    /// and with which subprotocol (or stream flavour), and its reconnects so far.
    func record(_ event: TransportEvent, lane: LaneID = .primary, connection: Int, context: (url: String, wire: String, reconnects: Int)) {
        // As every local user sees it (no user info, no query string, where some servers take
        // a key): the journal is for operators, not for the upstream's credentials.
        let url = StatusReport.shown(context.url)
        let events = self.events.adding(["GQLMUX_CONNECTION": "\(connection)"])
        switch event {
        case .stateChanged(let state):
            switch state {
            case .connecting(let attempt):
                events.emit(.connecting, ["GQLMUX_URL": url, "GQLMUX_ATTEMPT": "\(attempt)"], message: "connecting to \(url) (attempt \(attempt))")
            case .reconnecting(let attempt, let delay, let cause):
                metrics.reconnectScheduled(cause: cause)
                events.emit(
                    .reconnecting,
                    ["GQLMUX_ATTEMPT": "\(attempt)", "GQLMUX_DELAY_SEC": delay.formattedSeconds(decimals: 3), "GQLMUX_CAUSE": cause.description],
                    message: StatusReport.describe(state)
                )
            case .failed(let code, let reason):
                var fields = ["GQLMUX_REASON": reason]
                if let code { fields["GQLMUX_CLOSE_CODE"] = "\(code)" }
                events.emit(.failed, fields, message: StatusReport.describe(state))
            default:
                break
            }
        case .connected:
            let wire = context.wire
            events.emit(.connected, ["GQLMUX_URL": url, "GQLMUX_PROTOCOL": wire], message: "connected to \(url) (\(wire))")
        case .reconnected:
            metrics.reconnected(lane: lane, connection: connection, at: .now)
            let wire = context.wire
            events.emit(
                .reconnected,
                ["GQLMUX_URL": url, "GQLMUX_RECONNECTS": "\(context.reconnects)", "GQLMUX_PROTOCOL": wire],
                message: "reconnected to \(url) (\(wire))"
            )
        case .disconnected(let code, let reason):
            metrics.connectionLost(lane: lane, connection: connection, at: .now)
            var fields = ["GQLMUX_REASON": reason]
            if let code { fields["GQLMUX_CLOSE_CODE"] = "\(code)" }
            events.emit(.disconnected, fields, message: "disconnected: \(reason)")
        case .ping(let received):
            events.emit(.ping, ["GQLMUX_DIRECTION": received ? "in" : "out"], message: received ? "ping received" : "ping sent")
        case .pong(let received):
            events.emit(.pong, ["GQLMUX_DIRECTION": received ? "in" : "out"], message: received ? "pong received" : "pong sent")
        case .keepAlive:
            break  // every few seconds: the operator's view shows its gap, the journal does not
        case .protocolFallback(let refused, let next):
            events.emit(
                .protocolFallback,
                ["GQLMUX_URL": url, "GQLMUX_PROTOCOL": next.rawValue, "GQLMUX_REFUSED_PROTOCOL": refused.rawValue],
                message: "\(url) accepted \(refused.rawValue), then closed 1002 before acknowledging it: offering \(next.rawValue) from now on"
            )
        case .quarantined(let id, let code):
            let closeCode = code.description
            events.emit(
                .quarantined,
                ["GQLMUX_OPERATION_ID": "\(id)", "GQLMUX_CLOSE_CODE": closeCode],
                message:
                    "upstream operation \(id) quarantined: the upstream closed (\(closeCode)), blaming what it was sent, right after it was sent; not sent again"
            )
        }
    }
}
