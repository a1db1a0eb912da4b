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

    func endpointRefused(_ event: DaemonEvent, listener: ClientSession.Origin, fields: [String: String], message: String) {
        eventLoop.assertInEventLoop()
        var fields = fields
        fields["GQLMUX_LISTENER"] = listenerName(listener)
        events.emit(event, fields, message: message)
        let reason: String
        switch event {
        case .unauthorized: reason = "unauthorized"
        case .requestTimeout: reason = "timeout"
        default: reason = fields["GQLMUX_REASON"] ?? "foreign_origin"
        }
        metrics.refused(listener: listener.rawValue, reason: reason)
    }
}
