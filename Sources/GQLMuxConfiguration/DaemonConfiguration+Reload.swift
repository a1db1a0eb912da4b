import UpstreamSettings

extension DaemonConfiguration {
    /// This configuration, read anew for a reload of `running`: keys that take effect only at
    /// start (the socket, `[metrics]`, `[log]`, `max_line_bytes` and `client_buffer_bytes`,
    /// which size live sockets, and the endpoint's `socket`, `mode`, `listen` and `path`) keep
    /// their running values. Throws when the result may not replace `running` without a
    /// restart, or its access rules do not hold.
    package func reloading(_ running: DaemonConfiguration) throws(ConfigurationError) -> DaemonConfiguration {
        var next = self
        next.socketPath = running.socketPath
        next.socketMode = running.socketMode
        next.metricsListen = running.metricsListen
        next.logLevel = running.logLevel
        next.logTarget = running.logTarget
        next.limits.maxLineBytes = running.limits.maxLineBytes
        next.limits.clientBufferBytes = running.limits.clientBufferBytes
        // The endpoint's listeners stay as bound: the access rules are checked against them, so
        // a reload that drops `listen` from the file cannot drop the token a running TCP port needs.
        next.graphqlEndpoint.socket = running.graphqlEndpoint.socket
        next.graphqlEndpoint.mode = running.graphqlEndpoint.mode
        next.graphqlEndpoint.listen = running.graphqlEndpoint.listen
        next.graphqlEndpoint.path = running.graphqlEndpoint.path
        try next.checkEndpointAccess()
        for entry in next.upstreams {
            guard let old = running.upstream(named: entry.name) else { continue }
            let section = entry.name == NamedUpstream.defaultName ? "[upstream]" : "[upstreams.\(entry.name)]"
            let how = entry.name == NamedUpstream.defaultName ? "a restart" : "a restart, or a reload without it and another with it"
            guard entry.upstream.carrier == old.upstream.carrier else {
                throw ConfigurationError(
                    "\(section) transport: changing it from \"\(old.upstream.carrier.rawValue)\" to \"\(entry.upstream.carrier.rawValue)\" needs \(how)"
                )
            }
            guard entry.identity.name == old.identity.name else {
                throw ConfigurationError("\(section) identity: changing it from \"\(old.identity.name)\" to \"\(entry.identity.name)\" needs \(how)")
            }
        }
        return next
    }
}
