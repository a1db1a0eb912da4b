import Foundation
import GQLMuxDaemon
import NIOPosix
import TestUpstream
import Testing

@Suite(.serialized) struct StrawberryDaemonTests {
    @Test func fiveClientsShareOneStrawberrySubscriptionThroughTheDaemon() async throws {
        let python = try #require(StrawberryServer.python, "no interop virtualenv: run scripts/test.sh")
        let strawberry = try StrawberryServer(python: python)
        try await strawberry.start()
        defer { strawberry.kill() }
        let directory = NSTemporaryDirectory() + "gqlmuxd-sb-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let configuration = try DaemonConfiguration.parse(
            """
            [upstream]
            url = "\(strawberry.url)"
            connecting_payload = { token = "secret" }
            reconnect_interval = 0.2
            [socket]
            path = "\(directory)/gqlmux.sock"
            """
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let log = EventLog()
        let daemon = try Daemon(configuration: configuration, configPath: nil, eventLoop: group.next(), events: log.events)
        try await daemon.start()
        await eventually("connected to strawberry", within: 15) { log.count(.connected) == 1 }

        var clients: [LineClient] = []
        for i in 0..<5 {
            let client = try await LineClient.connect(configuration.socketPath, group: group)
            client.subscribe(id: "t\(i)", "subscription { tick(intervalMs: 50) }")
            clients.append(client)
        }
        await eventually("every client receives ticks") { clients.allSatisfy { $0.lines(containing: #""type":"next""#).count >= 3 } }
        let probe = try await LineClient.connect(configuration.socketPath, group: group)
        probe.subscribe(id: "q", "{ hello }")
        probe.subscribe(id: "m", "mutation { increment }")
        await eventually("query and mutation answered") {
            probe.lines.contains(#"{"type":"next","id":"q","payload":{"data":{"hello":"world"}}}"#)
                && !probe.lines(containing: #""id":"m","payload":{"data":{"increment":"#).isEmpty
                && probe.lines(containing: #""type":"complete""#).count == 2
        }
        probe.send(#"{"type":"status","id":"st"}"#)
        await eventually("status answered") { !probe.lines(containing: #""type":"status""#).isEmpty }
        let status = probe.lines(containing: #""type":"status""#).first ?? ""
        #expect(status.contains(#""subscriptions":{"local":5,"upstream":1}"#), "\(status)")

        // Restart strawberry in the middle: every client sees reconnecting, then ticks again.
        strawberry.kill()
        await eventually("reconnecting told to every client") {
            clients.allSatisfy { !$0.lines(containing: #""state":"reconnecting""#).isEmpty }
        }
        let counts = clients.map { $0.lines(containing: #""type":"next""#).count }
        try await strawberry.start()
        await eventually("ticks again after the restart", within: 20) {
            zip(clients, counts).allSatisfy { client, before in client.lines(containing: #""type":"next""#).count >= before + 2 }
        }
        await daemon.shutdown()
        try? await group.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
