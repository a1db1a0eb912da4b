import ArgumentParser
import GQLMuxConfiguration
import GQLMuxCtlCommand
import GQLMuxDaemon
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SystemdSupport

#if canImport(Glibc)
import Glibc
#endif

@main
enum Entry {
    static func main() async {
        // One binary for both commands: run as `gqlmuxctl` (the package's /usr/bin/gqlmuxctl
        // is a symbolic link to gqlmuxd), it is the CLI.
        if let name = CommandLine.arguments.first?.split(separator: "/").last, name == "gqlmuxctl" {
            await GQLMuxCtlEntry.main(Array(CommandLine.arguments.dropFirst()))
            return
        }
        // A SIGHUP that arrives before the handlers are installed must not kill us (exit 129).
        // SIGTERM and SIGINT keep their default action until the ServiceGroup traps them, so
        // a stop requested during start-up still stops the process.
        signal(SIGHUP, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        raiseOpenFileLimit()
        await GQLMuxd.main()
    }
}

/// Raises the soft open-file limit to the hard one (systemd gives services 1,024 soft; the unit
/// sets `LimitNOFILE=`). The figure in force is logged with the `started` event, and each
/// listener's connection limit is planned within it.
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

struct GQLMuxd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gqlmuxd",
        abstract: "Share one upstream GraphQL subscription connection with every process on this host.",
        discussion: """
            Shares its connections to each configured upstream GraphQL server among every local \
            client, over the transport the upstream's configuration names: a WebSocket speaking \
            graphql-transport-ws or the legacy graphql-ws, AWS AppSync's real-time WebSocket, Apollo \
            multipart subscriptions over HTTP, or GraphQL over Server-Sent Events (SSE). Serves local \
            clients on a Unix socket (protocol v1) and as a local GraphQL endpoint. Under systemd it \
            reports its state with sd_notify, adopts socket-activated listeners, and logs native \
            journald entries. SIGHUP reloads the configuration and credentials; SIGTERM and SIGINT \
            stop gracefully (under systemd with a file descriptor store, a restart hands every client \
            to the next process).
            """,
        version: Daemon.version
    )

    @Option(name: .long, help: "Configuration file (TOML).")
    var config = "/etc/gqlmux/gqlmuxd.toml"

    @Option(
        name: .long,
        help: "Unix socket path (default: $GQLMUX_SOCKET, else [socket] path, else /run/gqlmux/gqlmux.sock; ignored when socket-activated)."
    )
    var socket: String?

    func run() async throws {
        let notifier = SystemdNotifier()
        var configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration.load(path: config)
        } catch {
            throw startFailure("config \(config): \(error)", errno: EINVAL, notifier)
        }
        // The same precedence as the clients': --socket, then $GQLMUX_SOCKET, then the file.
        if let path = socket ?? getenv("GQLMUX_SOCKET").map({ String(cString: $0) }), !path.isEmpty {
            configuration.socketPath = path
        }
        let events = Self.events(configuration)

        let adopted: ListenFDs.Passed
        do {
            adopted = try ListenFDs.adopt()
        } catch {
            throw startFailure("socket activation: \(error)", errno: EBADF, notifier)
        }
        if let fd = adopted.line, let path = ListenFDs.boundPath(fd) { configuration.socketPath = path }
        if let fd = adopted.graphql, let path = ListenFDs.boundPath(fd) { configuration.graphqlEndpoint.socket = path }
        let inheritance = SystemdHandover.inheritance(adopted.stored, configuration: configuration)

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        var hooks = DaemonHooks()
        if let capacity = FileDescriptorStore.capacity {
            hooks.onlineRestart = .init(
                store: { package in try SystemdHandover.store(package, capacity: capacity, loop: loop) },
                stopIsRestart: { SystemdHandover.stopIsRestart() },
                requestStop: { kill(getpid(), SIGTERM) }
            )
        }
        let lastStatus = NIOLockedValueBox("")
        hooks.statusChanged = { line in
            let changed = lastStatus.withLockedValue { last in
                defer { last = line }
                return last != line
            }
            if changed { notifier.status(line) }
        }
        let ready = NIOLockedValueBox(false)
        hooks.lifecycle = { change in
            switch change {
            case .ready:
                ready.withLockedValue { $0 = true }
                notifier.ready()
            case .reloading: notifier.reloading()
            case .stopping: notifier.stopping(status: "stopping: closing clients and the upstream")
            }
        }
        let daemon: Daemon
        do {
            daemon = try Daemon(
                configuration: configuration,
                configPath: config,
                listeners: .init(line: adopted.line, graphql: adopted.graphql, inheritance: inheritance),
                eventLoop: loop,
                events: events,
                hooks: hooks
            )
        } catch {
            throw startFailure("cannot start: \(error)", errno: (error as? IOError)?.errnoCode ?? EIO, notifier)
        }

        // The watchdog, the metrics endpoint, the daemon and SIGHUP reloads, until SIGTERM/SIGINT.
        let journal = Self.journalWanted(configuration)
        let lifecycleLogger = Logger(label: "gqlmuxd.lifecycle") { _ in
            JournalLogHandler(identifier: "gqlmuxd", level: .warning, destination: journal ? .journal : .stderr)
        }
        do {
            try await DaemonServices.run(daemon, notifier: notifier, logger: lifecycleLogger)
        } catch {
            // Before READY=1 this is a start failure (a socket or port in use). After it nothing
            // throws (a drain's errors are ignored), but if something did, it exits non-zero.
            if !ready.withLockedValue({ $0 }) {
                throw startFailure("cannot start: \(error)", errno: (error as? IOError)?.errnoCode ?? EIO, notifier)
            }
            throw error
        }
        let restart = (try? await daemon.eventLoop.submit { daemon.restartRequested }.get()) ?? false
        try? await group.shutdownGracefully()
        // `gqlmuxctl restart`: systemd starts us again on this status (RestartForceExitStatus=).
        if restart { throw ExitCode(Daemon.restartExitCode) }
    }

    /// Logs native journald entries when stderr is the journal (or `[log] target = "journal"`),
    /// plain lines otherwise. Every event carries `GQLMUX_EVENT` and its `MESSAGE_ID`.
    static func events(_ configuration: DaemonConfiguration) -> DaemonEvents {
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let journal = journalWanted(configuration)
        let logger = Logger(label: "gqlmuxd") { _ in
            JournalLogHandler(identifier: "gqlmuxd", level: level, destination: journal ? .journal : .stderr)
        }
        return DaemonEvents { event, message, fields, source in
            var metadata: Logger.Metadata = ["GQLMUX_EVENT": .string(event.rawValue), "MESSAGE_ID": .string(event.messageID)]
            for (key, value) in fields { metadata[key] = .string(value) }
            logger.log(
                level: event.severity.logLevel,
                "\(message)",
                metadata: metadata,
                source: "gqlmuxd",
                file: source.file,
                function: source.function,
                line: source.line
            )
        }
    }

    /// `[log] target`: the journal when set so, or when stderr is the journal (`auto`).
    static func journalWanted(_ configuration: DaemonConfiguration) -> Bool {
        switch configuration.logTarget {
        case .journal: true
        case .stderr: false
        case .auto: JournalLogHandler.stderrIsJournal
        }
    }

    /// One clear line on stderr, `ERRNO=` + `STATUS=` to systemd, exit code 1.
    private func startFailure(_ message: String, errno code: Int32, _ notifier: SystemdNotifier) -> any Error {
        notifier.failed(errno: code, status: "failed: \(message)")
        var line = Array("gqlmuxd: \(message)\n".utf8)
        _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
        return ExitCode.failure
    }
}

extension DaemonEvent.Severity {
    var logLevel: Logger.Level {
        switch self {
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }
}

extension Duration {
    var nanosecondsValue: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
