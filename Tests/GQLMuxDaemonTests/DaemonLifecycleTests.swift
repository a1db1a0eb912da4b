import Foundation
import GQLMuxClient
import GQLMuxDaemon
import NIOConcurrencyHelpers
import TestUpstream
import Testing

@Suite(.serialized) struct DaemonLifecycleTests {
    @Test func reloadAppliesNewCredentialsAndKeepsEverySubscription() async throws {
        try await DaemonRig.with(upstreamConfig: "connecting_payload = { token = \"one\" }") { rig in
            let c = try await rig.connect()
            c.subscribe(id: "a")
            c.subscribe(id: "b", "subscription Other { tick }")
            await until("both active upstream", upstream: rig.server) { $0.activeSubscriptions == 2 }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"one"}"#)
            var config = try String(contentsOfFile: rig.configPath, encoding: .utf8)
            config = config.replacingOccurrences(of: "token = \"one\"", with: "token = \"two\"")
            config = config.replacingOccurrences(of: "[socket]", with: "[upstream.headers]\nAuthorization = \"Bearer two\"\n[socket]")
            try config.write(toFile: rig.configPath, atomically: true, encoding: .utf8)
            c.send(#"{"type":"reload","id":"r"}"#)
            await until("reload ok", on: c) { c.lines.contains(#"{"type":"ok","id":"r"}"#) }
            await until("reconnected with both subscriptions", upstream: rig.server) { stats in
                stats.connections == 2 && stats.activeSubscriptions == 2
            }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"two"}"#)
            #expect(await rig.server.currentStats.lastRequestHeaders["authorization"] == "Bearer two")
            await rig.server.tick()
            await until("both tick after reload", on: c) {
                !c.lines(containing: #""id":"a","payload":{"data":{"tick":1}}"#).isEmpty
                    && !c.lines(containing: #""id":"b","payload":{"data":{"tick":1}}"#).isEmpty
            }
            #expect(c.lines(containing: #""type":"error""#).isEmpty)
        }
    }

    @Test func reloadWithABrokenConfigKeepsTheOldOneAndSaysWhy() async throws {
        try await DaemonRig.with() { rig in
            let c = try await rig.connect()
            c.subscribe(id: "a")
            await rig.upstreamActive(1)
            try "[upstream]\nurl = \"http://nope\"\n".write(toFile: rig.configPath, atomically: true, encoding: .utf8)
            c.send(#"{"type":"reload","id":"r"}"#)
            await until("reload refused", on: c) { !c.lines(containing: #""id":"r""#).isEmpty }
            #expect(c.lines(containing: #""id":"r""#).first?.contains("[upstream] url") == true)
            #expect(rig.log.count(.reloadFailed) == 1)
            await rig.server.tick()
            await until("still ticking", on: c) { !c.lines(containing: #""tick":1"#).isEmpty }
        }
    }

    @Test func gracefulShutdownTellsClientsCompletesUpstreamAndRemovesTheSocket() async throws {
        try await DaemonRig.with() { rig in
            let c = try await rig.connect()
            c.subscribe(id: "a")
            await until("active", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.stopDaemon()
            await until("client closed", on: c) { c.isClosed }
            #expect(c.lines.contains { $0.contains(#""id":"a""#) && $0.contains("SHUTTING_DOWN") })
            await until("upstream complete and close 1000", upstream: rig.server) { stats in
                stats.completesReceived == 1 && stats.clientCloseCodes == [1000]
            }
            #expect(!FileManager.default.fileExists(atPath: rig.socketPath))
        }
    }

    @Test func clientLibraryResubscribesAfterADaemonRestart() async throws {
        try await DaemonRig.with() { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath, clientName: "restart-test"))
            let states = NIOLockedValueBox<[GQLMuxSubscriptionState]>([])
            let subscription = client.subscribe(query: "subscription { tick }") { state in states.withLockedValue { $0.append(state) } }
            let results = NIOLockedValueBox<[String]>([])
            let reader = Task {
                for try await result in subscription { results.withLockedValue { $0.append(result.json) } }
            }
            await eventually("active") { subscription.state == .active }
            await rig.upstreamActive(1)
            await rig.server.tick()
            await eventually("first tick") { results.withLockedValue { $0.count } == 1 }
            try await rig.restartDaemon()
            await eventually("re-subscribed through the new daemon") {
                subscription.state == .active && states.withLockedValue { $0.contains(.reconnecting) }
            }
            await until("upstream has it again", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.tick()
            await eventually("tick through the new daemon") { results.withLockedValue { $0.count } == 2 }
            reader.cancel()
            await until("cancelling completes it at the daemon", upstream: rig.server) { $0.activeSubscriptions == 0 }
            await client.close()
        }
    }

    @Test func cancellingAQueryTaskCompletesItAtTheUpstream() async throws {
        try await DaemonRig.with() { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath))
            let task = Task { try await client.query("{ hold }") }
            await until("query reached the upstream", upstream: rig.server) { $0.queries == 1 }
            task.cancel()
            await until("complete sent upstream", upstream: rig.server) { $0.completesReceived == 1 }
            await #expect(throws: CancellationError.self) { try await task.value }
            await client.close()
        }
    }

    @Test func clientLibraryQueryMutationStatusAndTypedErrors() async throws {
        try await DaemonRig.with() { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath))
            let hello = try await client.query("{ hello }")
            #expect(hello.json == #"{"data":{"hello":"world"}}"#)
            struct Increment: Decodable { struct D: Decodable { var increment: Int }; var data: D }
            #expect(try await client.mutate("mutation { increment }").decode(Increment.self).data.increment == 1)
            await #expect(throws: GQLMuxError.invalidDocument) { try await client.query("{ hello ") }
            let status = try await client.status()
            #expect(status.contains(#""state":"connected""#))
            try await client.pause()
            await until("paused", upstream: rig.server) { $0.openConnections == 0 }
            try await client.resume()
            await client.close()
            let missing = GQLMuxClient(configuration: .init(socketPath: rig.directory + "/nope.sock"))
            await #expect(throws: GQLMuxError.daemonUnavailable) { try await missing.query("{ hello }") }
        }
    }
}
