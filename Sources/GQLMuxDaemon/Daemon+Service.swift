import GQLMuxConfiguration
import NIOCore
import ServiceLifecycle

/// The daemon as a swift-service-lifecycle `Service`: `run()` binds (the line socket, the
/// GraphQL endpoint, or the listeners systemd passed), starts the upstream, says it is ready,
/// serves until the group shuts down gracefully, then drains: `SHUTTING_DOWN` to clients,
/// `complete` upstream, close 1000, the socket files removed.
///
/// Its siblings in the group: the metrics endpoint (``MetricsEndpoint``), and in gqlmuxd the
/// watchdog and the SIGHUP reload. The group shuts them down in reverse order, so a sibling
/// listed before the daemon (the watchdog, the metrics endpoint) keeps running while it drains.
extension Daemon: Service {
    package func run() async throws {
        try await start()
        hooks.lifecycle?(.ready)
        // Cancellation (a sibling failed) ends the wait too; the drain is the same.
        try? await gracefulShutdown()
        hooks.lifecycle?(.stopping)
        // Under systemd with a file descriptor store, a restart hands the clients to the next
        // process; a stop closes them.
        if let onlineRestart = hooks.onlineRestart {
            let requested = (try? await eventLoop.submit { self.run.restartRequested }.get()) ?? false
            let (restart, why) = requested ? (true, "gqlmuxctl restart") : onlineRestart.stopIsRestart()
            if restart, await handOver(to: onlineRestart.store, reason: why) { return }
            if !restart {
                await shutdown(reason: why)
                return
            }
        }
        await shutdown()
    }
}

extension Daemon {
    /// The daemon and, with `[metrics] listen`, its metrics endpoint before it, as members of
    /// a service group in start order. gqlmuxd puts its watchdog before them and its SIGHUP
    /// reload after; the in-process test rigs run exactly these.
    package var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        let metrics = MetricsEndpoint(daemon: self).map { ServiceGroupConfiguration.ServiceConfiguration(service: $0, serviceName: "metrics") }
        return (metrics.map { [$0] } ?? []) + [.init(service: self, serviceName: "gqlmuxd")]
    }

    /// What the service manager hears about (sd_notify in gqlmuxd).
    package enum LifecycleChange: Sendable {
        /// Serving: after start-up, and again after each reload.
        case ready
        case reloading
        /// Draining before exit.
        case stopping
    }

    /// Listeners the service manager created (socket activation), adopted instead of binding.
    package struct AdoptedListeners: Sendable {
        package var line: CInt?
        package var graphql: CInt?
        /// What the previous process handed over (an online restart), if anything.
        package var inheritance: Inheritance
        package init(line: CInt? = nil, graphql: CInt? = nil, inheritance: Inheritance = Inheritance()) {
            self.line = line
            self.graphql = graphql
            self.inheritance = inheritance
        }
    }
}

/// `[metrics] listen` as a service: `run()` binds `GET /metrics`, tells the daemon where it
/// listens (the daemon waits for that before it binds its own sockets, so `status` and the
/// `started` event carry the address, and a port already in use fails the start), serves
/// until the group shuts down gracefully, then closes.
struct MetricsEndpoint: Service {
    let daemon: Daemon
    let listen: MetricsListenAddress

    /// The endpoint of `daemon`'s `[metrics] listen`, nil when it has none.
    init?(daemon: Daemon) {
        guard let listen = daemon.metricsBinding.listen else { return nil }
        self.daemon = daemon
        self.listen = listen
    }

    func run() async throws {
        let channel: any Channel
        do {
            channel = try await MetricsHTTPServer.bind(listen, on: daemon.eventLoop) { [daemon] in daemon.metricsText() }
        } catch {
            let failure = DaemonError("[metrics] listen: cannot listen on \(listen): \(error)")
            daemon.metricsBinding.bound.continuation.finish(throwing: failure)
            throw failure
        }
        var address = listen
        address.port = channel.localAddress?.port ?? listen.port
        daemon.metricsBinding.bound.continuation.yield(address.description)
        daemon.metricsBinding.bound.continuation.finish()
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

/// `[metrics] listen` (a start-only key), served by the sibling ``MetricsEndpoint``, and where
/// it listens once bound, or why it could not bind: `start` waits for it.
struct MetricsBinding: Sendable {
    let listen: MetricsListenAddress?
    let bound = AsyncThrowingStream<String, any Error>.makeStream()
}
