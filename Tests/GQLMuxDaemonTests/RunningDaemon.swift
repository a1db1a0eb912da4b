import GQLMuxDaemon
import Logging
import NIOCore
import ServiceLifecycle

/// A daemon in this process, run the way gqlmuxd runs it: its `Service.run()` in a
/// `ServiceGroup` (with the metrics endpoint beside it when `[metrics] listen` is set), so
/// start-up binds, says ready, serves, and a stop is the group's graceful shutdown: the drain
/// gqlmuxd does on SIGTERM. Every rig that runs a daemon in process starts it through this.
final class RunningDaemon: Sendable {
    let daemon: Daemon
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// Returns once the daemon `make` makes with the hooks it is given (`hooks`, and the wait for
    /// ready) is ready (bound and started), or throws why it could not start.
    init(hooks: DaemonHooks = DaemonHooks(), _ make: (DaemonHooks) throws -> Daemon) async throws {
        let (outcomes, outcome) = AsyncStream<Result<Void, any Error>>.makeStream()
        var hooks = hooks
        let given = hooks.lifecycle
        hooks.lifecycle = { change in
            given?(change)
            if case .ready = change { outcome.yield(.success(())) }
        }
        let daemon = try make(hooks)
        self.daemon = daemon
        let group = ServiceGroup(configuration: .init(services: daemon.services, logger: Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })))
        self.group = group
        task = Task {
            do {
                try await group.run()
                outcome.yield(.failure(RigError("the daemon's service group ended")))
            } catch {
                outcome.yield(.failure(error))
                throw error
            }
        }
        for await result in outcomes {
            try result.get()
            break
        }
    }

    /// The graceful stop (`SHUTTING_DOWN` to clients, `complete` upstream, close 1000, socket
    /// files removed); returns when the daemon's `run()` has returned.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

struct RigError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
