import Upstream

/// A reloaded configuration with its file I/O done (blocking: built on a thread pool).
package struct PreparedReload: Sendable {
    /// The whole configuration to run with. Keys that take effect only at start (the socket,
    /// `[metrics]`, `[log]`, `max_line_bytes` and `client_buffer_bytes`, which size live
    /// sockets, and the endpoint's `socket`, `mode`, `listen` and `path`) keep their running
    /// values.
    package var configuration: DaemonConfiguration
    package var upstream: PreparedUpstream

    /// - Parameters:
    ///   - path: the configuration file; nil re-applies the running configuration.
    ///   - running: the configuration in use.
    package init(path: String?, running: DaemonConfiguration) throws {
        var next = try path.map { path throws(ConfigurationError) in try DaemonConfiguration.load(path: path) } ?? running
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
        guard next.upstream.carrier == running.upstream.carrier else {
            throw ConfigurationError(
                "[upstream] transport: changing it from \"\(running.upstream.carrier.rawValue)\" to \"\(next.upstream.carrier.rawValue)\" needs a restart"
            )
        }
        upstream = try PreparedUpstream(next.upstream, checkPayloadFile: true)
        configuration = next
    }
}
