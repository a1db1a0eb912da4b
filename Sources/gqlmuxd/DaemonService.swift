import GQLMuxDaemon
import Logging
import NIOCore
import ServiceLifecycle
import SystemdSupport
import UnixSignals

/// gqlmuxd's service group: the watchdog, the metrics endpoint, the daemon and the SIGHUP
/// reload, in that order. SIGTERM or SIGINT starts a graceful shutdown, which the group runs in
/// reverse order: reloads stop, the daemon drains (`STOPPING=1`, `SHUTTING_DOWN` to clients,
/// `complete` upstream, close 1000), then the metrics endpoint closes and the watchdog stops
/// last, so systemd hears from us while the daemon drains. `maximumGracefulShutdownDuration`
/// bounds it below the unit's `TimeoutStopSec`. Any service that fails at start (a socket in
/// use, a metrics port taken) ends the group, and `run` throws its error.
enum DaemonServices {
    /// The graceful stop must end before systemd's TimeoutStopSec (15 s in gqlmuxd.service).
    static let maximumGracefulShutdown: Duration = .seconds(10)

    static func run(_ daemon: Daemon, notifier: SystemdNotifier, logger: Logger) async throws {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let interval = notifier.watchdogInterval {
            services.append(.init(service: WatchdogService(eventLoop: daemon.eventLoop, interval: interval, notifier: notifier), serviceName: "watchdog"))
        }
        services += daemon.services
        services.append(.init(service: ReloadOnHangup(daemon: daemon), serviceName: "reload"))
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdown
        try await ServiceGroup(configuration: configuration).run()
    }
}

/// SIGHUP reloads the configuration, one reload after the other, until the graceful shutdown.
/// A failed reload keeps the running configuration; the daemon says why (journal, STATUS,
/// `status`).
struct ReloadOnHangup: Service {
    let daemon: Daemon

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            _ = try? await daemon.reload().get()
        }
    }
}

/// `WATCHDOG=1` every half `WatchdogSec`, sent from the daemon's event loop: a stalled loop
/// stops the pings and systemd restarts us.
struct WatchdogService: Service {
    let eventLoop: any EventLoop
    let interval: Duration
    let notifier: SystemdNotifier

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { [eventLoop, interval, notifier] in
                while true {
                    try await Task.sleep(for: interval / 2)
                    try await eventLoop.submit { notifier.watchdog() }.get()
                }
            }
        } catch is CancellationError {
            // The group is done with us: the last service to stop.
        }
    }
}
