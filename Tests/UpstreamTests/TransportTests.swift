import Foundation
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import TestUpstream
import Testing

@testable import Upstream

@Suite(.serialized) struct TransportTests {
    @Test func subscribesReceivesTicksAndSendsHeaders() async throws {
        try await Rig.with(configure: {
            $0.headers = [("Authorization", "Bearer abc")]
            $0.clientName = "tests"
            $0.clientVersion = "1.2"
        }) { rig in
            try await rig.subscribe(key: "s")  // before the start: `pending` is told before any ack
            rig.transport.start()
            await until("subscription active upstream", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.tick()
            await rig.server.tick()
            await until("two ticks", on: rig.recorder) { rig.recorder.nexts("s").count == 2 }
            #expect(rig.recorder.nexts("s") == [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#])
            #expect(rig.recorder.states("s") == [.pending, .active])
            let headers = await rig.server.currentStats.lastRequestHeaders
            #expect(headers["authorization"] == "Bearer abc")
            #expect(headers["apollographql-client-name"] == "tests")
            #expect(headers["apollographql-client-version"] == "1.2")
            // protocol = "auto" (the default) offers both, modern first; the server picked the modern one.
            #expect(headers["sec-websocket-protocol"] == "graphql-transport-ws, graphql-ws")
            // A GET has no body: no body header (Python's `websockets` refuses an upgrade with one).
            #expect(headers["content-length"] == nil && headers["transfer-encoding"] == nil)
            #expect(await rig.server.currentStats.lastInitPayload == "")
        }
    }

    @Test func reconnectsAndResubscribesAfterAServerKill() async throws {
        try await Rig.with() { rig in
            try await rig.subscribe(key: "s")  // before the start: `pending` is told before any ack
            rig.transport.start()
            await until("subscribed", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.stop()
            await until("reconnecting state", on: rig.recorder) { rig.recorder.states("s").contains(.reconnecting) }
            try await Task.sleep(for: .milliseconds(300))
            try await rig.server.start()
            await until("resubscribed on the new server", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.tick()
            await until("tick after reconnect", on: rig.recorder) { rig.recorder.nexts("s").count == 1 }
            #expect(rig.recorder.states("s") == [.pending, .active, .reconnecting, .active])
            #expect(rig.recorder.count(.reconnected) == 1)
            #expect(rig.recorder.events.contains { if case .disconnected = $0 { true } else { false } })
        }
    }

    @Test(arguments: [UInt16(1000), 1011, 4500])
    func retryableCloseCodesReconnect(code: UInt16) async throws {
        try await Rig.with() { rig in
            // Subscribed before the start, so `pending` is told before any ack: subscribing
            // after `start()` raced the connect, and a loaded machine acked first (no `pending`).
            try await rig.subscribe(key: "s")
            rig.transport.start()
            await until("active", on: rig.recorder) { rig.recorder.states("s").last == .active }
            await rig.server.closeAll(code: code, reason: "later")
            await until("reconnected", upstream: rig.server) { $0.connections == 2 }
            await until("active again", on: rig.recorder) { rig.recorder.states("s") == [.pending, .active, .reconnecting, .active] }
            #expect(rig.recorder.states("s") == [.pending, .active, .reconnecting, .active], "events: \(rig.recorder.events)")
        }
    }

    @Test func rejectedAuthIsFatalAndCorrectCredentialsWorkAfterUpdate() async throws {
        var options = TestUpstreamServer.Options()
        options.requiredToken = "good"
        try await Rig.with(
            server: options,
            configure: {
                $0.connectingPayload = .inline(ByteBuffer(string: #"{"token":"bad"}"#))
            }
        ) { rig in
            rig.transport.start()
            await eventually("failed") {
                if case .failed(4403, _) = try! await rig.transport.connectionState.get() { return true }
                return false
            }
            try await rig.transport.update { $0.connectingPayload = .inline(ByteBuffer(string: #"{"token":"good"}"#)) }.get()
            try await rig.subscribe(key: "s")
            await until("active with the new token", on: rig.recorder) { rig.recorder.states("s").last == .active }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"good"}"#)
        }
    }

    @Test func mutationInFlightIsTerminatedAndNeverReplayed() async throws {
        try await Rig.with() { rig in
            rig.transport.start()
            try await rig.subscribe(key: "s")
            try await rig.subscribe(key: "m", "mutation { hold }", kind: .mutation)
            await until("mutation reached the server", upstream: rig.server) { $0.mutations == 1 }
            await rig.server.closeAll(code: 1011, reason: "internal error")
            await until("mutation lost", on: rig.recorder) { rig.recorder.finish("m") != nil }
            guard case .error(let error) = rig.recorder.finish("m") else {
                Issue.record("mutation not finished with an error")
                return
            }
            #expect(error == .transport(.connectionLost(reason: "upstream connection lost; the operation was not retried")))
            await until("subscription back", on: rig.recorder) { rig.recorder.states("s").last == .active && rig.recorder.states("s").count == 4 }
            // A barrier: once an operation sent after the reconnect has been answered, the server
            // has read everything sent before it, so a replayed mutation would be counted.
            _ = try await rig.subscribe(key: "barrier", "{ hello }", kind: .query)
            await until("barrier answered", on: rig.recorder) { !rig.recorder.nexts("barrier").isEmpty }
            #expect(await rig.server.currentStats.mutations == 1)
        }
    }

    @Test func queryAndMutationGetOneResult() async throws {
        try await Rig.with() { rig in
            rig.transport.start()
            try await rig.subscribe(key: "q", "{ hello }", kind: .query)
            try await rig.subscribe(key: "m", "mutation { increment }", kind: .mutation)
            await until("both completed", on: rig.recorder) { rig.recorder.finish("q") == .completed && rig.recorder.finish("m") == .completed }
            #expect(rig.recorder.nexts("q") == [#"{"data":{"hello":"world"}}"#])
            #expect(rig.recorder.nexts("m") == [#"{"data":{"increment":1}}"#])
        }
    }

    @Test func pauseHoldsSubscriptionsAndResumeRestoresThem() async throws {
        try await Rig.with() { rig in
            rig.transport.start()
            try await rig.subscribe(key: "s")
            await until("active", on: rig.recorder) { rig.recorder.states("s").last == .active }
            rig.transport.pause()
            await until("paused and closed upstream", upstream: rig.server, also: rig.recorder) { stats in
                stats.openConnections == 0 && rig.recorder.states("s").last == .paused
            }
            #expect(try await rig.transport.isQuiet.get(), "paused: no timer, no connect")
            #expect(await rig.server.currentStats.connections == 1)
            #expect(await rig.server.currentStats.clientCloseCodes == [1000])
            rig.transport.resume()
            await until("active again", on: rig.recorder) { rig.recorder.states("s").last == .active }
            // Active here means subscribed, not yet read by the server: a tick before it reads the
            // subscribe reaches nobody.
            await until("subscribed upstream again", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.tick()
            await until("tick after resume", on: rig.recorder) { rig.recorder.nexts("s").count == 1 }
        }
    }

    @Test func payloadUpdateReconnectsAndKeepsSubscriptions() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gqlmux-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("payload.json").path
        try #"{"token":"one"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        try await Rig.with(configure: { $0.connectingPayload = .file(file) }) { rig in
            rig.transport.start()
            try await rig.subscribe(key: "a")
            try await rig.subscribe(key: "b")
            await until("both active", upstream: rig.server) { $0.activeSubscriptions == 2 }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"one"}"#)
            try #"{"token":"two"}"#.write(toFile: file, atomically: true, encoding: .utf8)
            try await rig.transport.update { $0.headers = [("Authorization", "Bearer two")] }.get()
            await until("second connection with both subscriptions", upstream: rig.server) { stats in
                stats.connections == 2 && stats.activeSubscriptions == 2
            }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"two"}"#)
            #expect(await rig.server.currentStats.lastRequestHeaders["authorization"] == "Bearer two")
            #expect(rig.recorder.finish("a") == nil && rig.recorder.finish("b") == nil)
            await rig.server.tick()
            await until("both tick", on: rig.recorder) { rig.recorder.nexts("a").count == 1 && rig.recorder.nexts("b").count == 1 }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    @Test func failsClearlyWhenTheServerDoesNotSelectTheSubprotocol() async throws {
        var options = TestUpstreamServer.Options()
        options.selectSubprotocol = false
        try await Rig.with(server: options) { rig in
            rig.transport.start()
            await eventually("reconnecting with a clear cause") {
                rig.recorder.connectionStates.contains {
                    if case .reconnecting(_, _, let cause) = $0 {
                        cause.description.contains("did not select a subprotocol we offered (graphql-transport-ws, graphql-ws)")
                    } else {
                        false
                    }
                }
            }
        }
    }

    @Test func refusedConnectionIsRetriedWithBackoff() async throws {
        try await Rig.with() { rig in
            await rig.server.stop()
            rig.transport.start()
            await eventually("three refused attempts") {
                rig.recorder.connectionStates.filter { if case .reconnecting = $0 { true } else { false } }.count >= 3
            }
            let delays = rig.recorder.connectionStates.compactMap { if case .reconnecting(_, let d, _) = $0 { d.seconds } else { nil } }
            try #require(delays.count >= 3, "three refused attempts were not reported within the wait: \(delays)")
            #expect(delays[1] > delays[0] * 1.3 && delays[2] > delays[1] * 1.3, "\(delays)")
        }
    }

    @Test func upgradeThatNeverAnswersTimesOut() async throws {
        // A listener that accepts TCP and never speaks HTTP.
        let silent = try ServerSocketThatNeverAnswers()
        let group = MultiThreadedEventLoopGroupHolder()
        var configuration = UpstreamConfiguration(url: try UpstreamURL("ws://127.0.0.1:\(silent.port)/"))
        configuration.transport.connectTimeout = .milliseconds(300)
        let recorder = Recorder()
        let transport = try UpstreamTransport(configuration: configuration, eventLoop: group.loop, observer: { recorder.observe($0) })
        transport.start()
        await eventually("connect timeout") {
            recorder.connectionStates.contains {
                if case .reconnecting(_, _, let cause) = $0 {
                    cause == .connectTimeout(.milliseconds(300)) || cause.description.contains("connect timeout")
                } else {
                    false
                }
            }
        }
        try await transport.shutdown().get()
        silent.close()
        await group.shutdown()
    }

    @Test func lazyTransportConnectsOnFirstSubscribeOnly() async throws {
        try await Rig.with(configure: { $0.transport.lazy = true }) { rig in
            rig.transport.start()
            #expect(try await rig.transport.isQuiet.get(), "lazy and idle: nothing scheduled")
            #expect(await rig.server.currentStats.connections == 0)
            let id = try await rig.subscribe(key: "s")
            await until("connected on demand", upstream: rig.server) { $0.activeSubscriptions == 1 }
            rig.transport.complete(id: id)
            await until("closed when idle (lazy_close_timeout 0)", upstream: rig.server) { $0.openConnections == 0 }
            #expect(await rig.server.currentStats.completesReceived == 1)
        }
    }
}

@Suite(.serialized) struct MessageSizeTests {
    @Test func messageOverMaxMessageBytesDropsTheConnectionAndReconnects() async throws {
        try await Rig.with(configure: { $0.maxMessageBytes = 2048 }) { rig in
            rig.transport.start()
            try await rig.subscribe(key: "s")
            await until("active", upstream: rig.server) { $0.activeSubscriptions == 1 }
            await rig.server.tick(count: 1, padding: 100)
            await until("small message delivered", on: rig.recorder) { rig.recorder.nexts("s").count == 1 }
            await rig.server.tick(count: 1, padding: 10_000)
            await until("connection replaced", upstream: rig.server) { $0.connections == 2 }
            await until("subscription active again", on: rig.recorder) { rig.recorder.states("s").suffix(2) == [.reconnecting, .active] }
            #expect(rig.recorder.nexts("s").count == 1)
            #expect(rig.recorder.events.contains { if case .disconnected(1009, _) = $0 { true } else { false } })
        }
    }
}
