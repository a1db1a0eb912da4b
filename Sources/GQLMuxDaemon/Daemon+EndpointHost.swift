import EndpointServer
import GQLMuxConfiguration
import GQLMuxVocabulary
import LocalEndpoint
import NIOCore
import RequestValidation
import ResultDelivery

/// The control plane's answers to the endpoint's handlers.
extension Daemon: EndpointHost {
    package var endpointAccess: EndpointAccess { configuration.graphqlEndpoint.access }
    package var endpointToken: EndpointToken? { configuration.graphqlEndpoint.token }

    package func servesUpstream(_ name: String) -> Bool { configuration.upstream(named: name) != nil }

    package var forwardedHeaders: Set<String> {
        var names = Set<String>()
        for entry in configuration.upstreams {
            if case .client(let headers) = entry.identity { names.formUnion(headers) }
        }
        return names
    }

    /// Every refusal is counted in `gqlmux_refused_total`; the journal gets at most one entry a
    /// second for each kind of refusal from each sender (listener, reason, Host and Origin), so
    /// a page that retries in a loop cannot flood it. `GQLMUX_UNLOGGED` counts the ones left out.
    package func endpointRefused(_ refusal: EndpointRefusal, listener: ClientOrigin, fields: [String: String], message: String) {
        eventLoop.assertInEventLoop()
        let event: DaemonEvent
        switch refusal {
        case .requestRefused: event = .requestRefused
        case .unauthorized: event = .unauthorized
        case .requestTimeout: event = .requestTimeout
        }
        let key = [event.rawValue, listener.rawValue, fields["GQLMUX_REASON"] ?? "", fields["GQLMUX_HOST"] ?? "", fields["GQLMUX_ORIGIN"] ?? ""]
            .joined(separator: "\u{1F}")
        if let unlogged = listening.refusalLog.admit(key, now: .loopNow) {
            var fields = fields
            fields["GQLMUX_LISTENER"] = listenerName(listener)
            fields["GQLMUX_UNLOGGED"] = "\(unlogged)"
            events.emit(event, fields, message: message)
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

/// The control plane's part in building an endpoint connection's pipeline (``EndpointPipeline``).
extension Daemon: EndpointConnectionHost {
    package func endpointSession(_ channel: any Channel, origin: ClientOrigin, wire: EndpointWire) -> ClientSession {
        makeSession(channel, arrival: .init(origin, output: wire == .webSocket ? .webSocket : .http))
    }

    package func makeInboundBudget() -> any InboundBudget { InboundReservation(budget: switchboard.budget) }

    package var endpointPath: String { configuration.graphqlEndpoint.path }

    package var maxMessageBytes: Int { configuration.limits.maxLineBytes }
}
