import GQLMuxDaemon
import Logging
import NIOCore
import ServiceLifecycle
import SystemdSupport
import UnixSignals

/// gqlmuxd as a swift-service-lifecycle `Service`: it reads SIGHUP (reload) until the
/// `ServiceGroup` starts a graceful shutdown (SIGTERM or SIGINT), then stops the daemon:
/// `STOPPING=1`, `SHUTTING_DOWN` to clients, `complete` upstream, close 1000. The group bounds
/// that with `maximumGracefulShutdownDuration`, below the unit's `TimeoutStopSec`.
struct DaemonService: Service {
    let daemon: Daemon
    let notifier: SystemdNotifier

    /// The graceful stop must end before systemd's TimeoutStopSec (15 s in gqlmuxd.service).
    static let maximumGracefulShutdown: Duration = .seconds(10)

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            // A failed reload keeps the running configuration; the daemon says why (journal,
            // STATUS, `status`).
            _ = try? await daemon.reload().get()
        }
        notifier.stopping(status: "stopping: closing clients and the upstream")
        await daemon.shutdown()
    }

    /// Runs `daemon` until SIGTERM or SIGINT, in a `ServiceGroup`.
    static func run(_ daemon: Daemon, notifier: SystemdNotifier, logger: Logger) async throws {
        var configuration = ServiceGroupConfiguration(
            services: [.init(service: DaemonService(daemon: daemon, notifier: notifier), serviceName: "gqlmuxd")],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdown
        try await ServiceGroup(configuration: configuration).run()
    }
}
