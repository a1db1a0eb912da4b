import GQLMuxConfiguration
import LocalEndpoint
import NIOCore
import RequestValidation

/// What the endpoint's handlers ask the control plane, on the daemon's loop: the access
/// settings as of now (a reload applies to every listener at once), the document limits, and
/// where to report a refusal.
protocol EndpointHost: AnyObject {
    var endpointAccess: EndpointAccess { get }
    /// The token a TCP client must present; nil when `token_file` is not set.
    var endpointToken: EndpointToken? { get }
    var documentLimits: SubscribeRequest.Limits { get }
    /// A request was refused by the browser checks or the token check.
    func endpointRefused(_ event: DaemonEvent, listener: ClientSession.Origin, fields: [String: String], message: String)
}

extension Daemon: EndpointHost {
    var endpointAccess: EndpointAccess { configuration.graphqlEndpoint.access }
    var endpointToken: EndpointToken? { configuration.graphqlEndpoint.token }

    /// Every refusal is counted in `gqlmux_refused_total`; the journal gets at most one entry a
    /// second for each kind of refusal from each sender (listener, reason, Host and Origin), so
    /// a page that retries in a loop cannot flood it. `GQLMUX_UNLOGGED` counts the ones left out.
    func endpointRefused(_ event: DaemonEvent, listener: ClientSession.Origin, fields: [String: String], message: String) {
        eventLoop.assertInEventLoop()
        let key = [event.rawValue, listener.rawValue, fields["GQLMUX_REASON"] ?? "", fields["GQLMUX_HOST"] ?? "", fields["GQLMUX_ORIGIN"] ?? ""]
            .joined(separator: "\u{1F}")
        let now = NIODeadline.now()
        if let last = refusalLog[key], now - last.at < .seconds(1) {
            refusalLog[key] = (last.at, last.unlogged + 1)
        } else {
            if refusalLog.count >= 1024 { refusalLog = [:] }
            var fields = fields
            fields["GQLMUX_LISTENER"] = listenerName(listener)
            fields["GQLMUX_UNLOGGED"] = "\(refusalLog[key]?.unlogged ?? 0)"
            events.emit(event, fields, message: message)
            refusalLog[key] = (now, 0)
        }
        let reason: String
        switch event {
        case .unauthorized: reason = "unauthorized"
        case .requestTimeout: reason = "timeout"
        default: reason = fields["GQLMUX_REASON"] ?? "foreign_origin"
        }
        metrics.refused(listener: listener.rawValue, reason: reason)
    }
}
