import Foundation
import GQLMuxDaemon
import NIOCore
import NIOPosix
import TestUpstream
import Testing

/// A daemon in this process against `strawberry`, on a socket in a temporary directory.
struct StrawberryRig {
    let directory: String
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let log = EventLog()
    private let running: RunningDaemon
    var daemon: Daemon { running.daemon }
    var socket: String { directory + "/gqlmux.sock" }

    /// Starts strawberry (`protocols`: "modern", "legacy" or "both"), then a daemon with
    /// `upstream` added to its `[upstream]` table; runs `body`; always stops both.
    static func with(
        protocols: String = "modern",
        upstream: (StrawberryServer) -> String,
        _ body: (StrawberryServer, StrawberryRig) async throws -> Void
    ) async throws {
        let python = try #require(StrawberryServer.python, "no interop virtualenv: run scripts/test.sh")
        let strawberry = try StrawberryServer(python: python, protocols: protocols)
        try await strawberry.start()
        defer { strawberry.kill() }
        let rig = try await StrawberryRig(strawberry, upstream: upstream(strawberry))
        try await scoped(rig, tearDown: { await $0.tearDown() }) { try await body(strawberry, $0) }
    }

    init(_ strawberry: StrawberryServer, upstream: String) async throws {
        directory = try makeTemporaryDirectory("gqlmuxd-legacy")
        let configuration = try DaemonConfiguration.parse(
            "[upstream]\nurl = \"\(strawberry.url)\"\nreconnect_interval = 0.2\nreconnect_max_interval = 1\n\(upstream)\n"
                + "[socket]\npath = \"\(directory)/gqlmux.sock\"\n"
        )
        let (loop, events) = (group.next(), log.events)
        running = try await RunningDaemon { hooks in try Daemon(configuration: configuration, configPath: nil, eventLoop: loop, events: events, hooks: hooks) }
    }

    func status(_ client: LineClient) async -> String {
        let before = client.lines(containing: #""type":"status""#).count
        client.send(#"{"type":"status","id":"status"}"#)
        await eventually("status answered") { client.lines(containing: #""type":"status""#).count > before }
        return client.lines(containing: #""type":"status""#).last ?? ""
    }

    func tearDown() async {
        await running.stop()
        try? await group.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
