import ArgumentParser
import Dispatch
import GQLMuxDaemon
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

@main
enum Entry {
    static func main() async {
        // A SIGHUP that arrives before the handlers are installed must not kill us (exit 129).
        signal(SIGHUP, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        await GQLMuxd.main()
    }
}

struct GQLMuxd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gqlmuxd",
        abstract: "Share one upstream GraphQL subscription connection with every process on this host.",
        discussion: """
            Keeps one graphql-transport-ws WebSocket to the upstream and serves local clients on a \
            Unix socket (protocol v1). SIGHUP reloads the configuration and credentials; SIGTERM \
            and SIGINT stop gracefully.
            """,
        version: Daemon.version
    )

    @Option(name: .long, help: "Configuration file (TOML).")
    var config = "/etc/gqlmux/gqlmuxd.toml"

    @Option(name: .long, help: "Unix socket path (overrides [socket] path).")
    var socket: String?

    func run() async throws {
        var configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration.load(path: config)
        } catch {
            throw CleanExit.message("gqlmuxd: config \(config): \(error)").failing
        }
        if let socket { configuration.socketPath = socket }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let daemon: Daemon
        do {
            daemon = try Daemon(configuration: configuration, configPath: config, eventLoop: group.next())
            try await daemon.start()
        } catch {
            throw CleanExit.message("gqlmuxd: cannot start: \(error)").failing
        }

        let finished = AsyncStream<Void>.makeStream()
        let queue = DispatchQueue(label: "gqlmuxd.signals")
        var sources: [any DispatchSourceSignal] = []
        let hup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
        hup.setEventHandler { _ = daemon.reload() }
        sources.append(hup)
        for sig in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                Task {
                    await daemon.shutdown()
                    finished.continuation.finish()
                }
            }
            sources.append(source)
        }
        sources.forEach { $0.resume() }
        for await _ in finished.stream {}
        sources.forEach { $0.cancel() }
        try? await group.shutdownGracefully()
    }
}

extension CleanExit {
    /// Prints the message to stderr and exits non-zero.
    var failing: any Error { ExitWithMessage(message: "\(self)") }
}

struct ExitWithMessage: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
