import NIOCore
import NIOPosix
import Upstream

/// A reload is all or nothing. Everything that can fail (reading and checking the file, the
/// connecting payload file, the CA files behind the TLS contexts) happens first, on a thread
/// pool, never on the loop that serves clients. The result is applied on the loop in one step
/// that cannot fail. On any failure the running configuration is kept entirely, and the daemon
/// says why: `reload_failed` in the journal, `reloadError` in `status` and STATUS, an error to
/// the `reload` verb.
extension Daemon {
    /// Re-reads the configuration file and applies limits, security lists, credentials,
    /// headers, the URL and `http_url`; subscriptions are kept (the transport reconnects if
    /// `reconnect_if_connected`). Reloads run one after the other.
    package func reload() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            let previous = self.lastReload ?? self.eventLoop.makeSucceededVoidFuture()
            let this = previous.flatMapErrorWithEventLoop { _, loop in loop.makeSucceededVoidFuture() }.flatMap { self.reloadNow() }
            self.lastReload = this
            return this
        }
    }

    private func reloadNow() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        onLifecycle?(.reloading)
        let running = configuration
        let path = configPath
        let done = NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) {
            try PreparedReload(path: path, running: running)
        }
        .map { prepared in self.apply(prepared) }
        done.whenFailure { error in
            self.reloadError = "\(error)"
            self.events.emit(.reloadFailed, ["GQLMUX_ERROR": "\(error)"], message: "reload failed, configuration kept: \(error)")
        }
        done.whenComplete { _ in
            self.onLifecycle?(.ready)
            self.statusChanged()
        }
        return done
    }

    /// Applies a prepared reload on the loop; nothing here can fail.
    private func apply(_ prepared: PreparedReload) {
        eventLoop.assertInEventLoop()
        configuration = prepared.configuration
        fanout.apply(configuration)
        // `http_url`: new requests use the new settings; unset stops using HTTP (requests in
        // flight finish).
        if let settings = configuration.upstream.httpOperations {
            if let http = fanout.http {
                http.applyOnLoop(settings, sslContext: prepared.upstream.httpTLS)
            } else {
                fanout.http = HTTPOperations(configuration: settings, sslContext: prepared.upstream.httpTLS, eventLoop: eventLoop)
            }
        } else {
            fanout.http = nil
        }
        subscriptionUpstream.applyOnLoop(prepared.upstream)
        reloadError = nil
        events.emit(.reloaded, [:], message: "configuration reloaded")
    }
}

/// A reloaded configuration with its file I/O done (blocking: built on a thread pool).
struct PreparedReload: Sendable {
    /// The whole configuration to run with. Keys that take effect only at start (the socket,
    /// `[metrics]`, `[log]`, `max_line_bytes` and `client_buffer_bytes`, which size live
    /// sockets) keep their running values.
    var configuration: DaemonConfiguration
    var upstream: PreparedUpstream

    /// - Parameters:
    ///   - path: the configuration file; nil re-applies the running configuration.
    ///   - running: the configuration in use.
    init(path: String?, running: DaemonConfiguration) throws {
        var next = try path.map { path throws(ConfigurationError) in try DaemonConfiguration.load(path: path) } ?? running
        next.socketPath = running.socketPath
        next.socketMode = running.socketMode
        next.metricsListen = running.metricsListen
        next.logLevel = running.logLevel
        next.logTarget = running.logTarget
        next.limits.maxLineBytes = running.limits.maxLineBytes
        next.limits.clientBufferBytes = running.limits.clientBufferBytes
        guard next.upstream.carrier == running.upstream.carrier else {
            throw ConfigurationError(
                "[upstream] transport: changing it from \"\(running.upstream.carrier.rawValue)\" to \"\(next.upstream.carrier.rawValue)\" needs a restart"
            )
        }
        upstream = try PreparedUpstream(next.upstream, checkPayloadFile: true)
        configuration = next
    }
}
