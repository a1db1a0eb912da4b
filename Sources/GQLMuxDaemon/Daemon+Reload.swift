import GQLMuxConfiguration
import GQLMuxVocabulary
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
            let previous = self.run.lastReload ?? self.eventLoop.makeSucceededVoidFuture()
            let this = previous.flatMapErrorWithEventLoop { _, loop in loop.makeSucceededVoidFuture() }.flatMap { self.reloadNow() }
            self.run.lastReload = this
            return this
        }
    }

    private func reloadNow() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        hooks.lifecycle?(.reloading)
        let running = configuration
        let path = configPath
        let done = NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) {
            try PreparedReload(path: path, running: running)
        }
        .map { prepared in self.apply(prepared) }
        done.whenFailure { error in
            self.run.reloadError = "\(error)"
            self.events.emit(.reloadFailed, ["GQLMUX_ERROR": "\(error)"], message: "reload failed, configuration kept: \(error)")
        }
        done.whenComplete { _ in
            self.hooks.lifecycle?(.ready)
            self.statusChanged()
        }
        return done
    }

    /// Applies a prepared reload on the loop; nothing here can fail.
    private func apply(_ prepared: PreparedReload) {
        eventLoop.assertInEventLoop()
        configuration = prepared.configuration
        listening.descriptorPlan = DescriptorPlan(openFiles: Self.openFileLimit(), configuration: configuration)
        switchboard.apply(configuration)
        switchboard.budget.limit = configuration.limits.totalBufferBytes
        upstreams.maxIdentities = configuration.limits.maxIdentities
        let applied = upstreams.applyOnLoop(prepared.definitions)
        for (lane, layout) in applied.layouts { switchboard.setLayout(layout, of: lane) }
        // A removed upstream's subscriptions end with UNKNOWN_UPSTREAM; then its connections close.
        for lane in applied.removed {
            switchboard.endLane(lane, .upstreamRemoved(name: upstreams.lane(lane)?.upstream ?? "?"))
        }
        _ = upstreams.retireOnLoop(applied.removed)
        run.reloadError = nil
        events.emit(
            .reloaded,
            ["GQLMUX_UPSTREAMS": upstreams.names.joined(separator: " ")],
            message: "configuration reloaded (upstreams: \(upstreams.names.joined(separator: ", ")))"
        )
    }
}
