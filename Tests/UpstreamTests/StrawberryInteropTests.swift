import Foundation
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOPosix
import TestUpstream
import Testing

@testable import Upstream

@Suite(.serialized) struct StrawberryInteropTests {
    /// Starts strawberry and a transport sending `{"token": token}`, runs `body`, tears both down.
    /// - Parameter startsTransport: false leaves the transport idle, so `body`'s first subscribe
    ///   is what opens the connection.
    func withStrawberry(
        token: String,
        startsTransport: Bool = true,
        _ body: (StrawberryServer, UpstreamTransport, Recorder) async throws -> Void
    ) async throws {
        let python = try #require(StrawberryServer.python, "no interop virtualenv: run scripts/test.sh, which installs strawberry-graphql and uvicorn")
        let server = try StrawberryServer(python: python)
        try await server.start()
        defer { server.kill() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = UpstreamConfiguration(url: try UpstreamURL(server.url))
        configuration.connectingPayload = .inline(ByteBuffer(string: #"{"token":"\#(token)"}"#))
        configuration.transport.backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(1), multiplier: 2, jitter: 0.1)
        let recorder = Recorder()
        let transport = try UpstreamTransport(configuration: configuration, eventLoop: group.next(), observer: { recorder.observe($0) })
        if startsTransport { transport.start() }
        do {
            try await body(server, transport, recorder)
        } catch {
            try? await transport.shutdown().get()
            try? await group.shutdownGracefully()
            throw error
        }
        try await transport.shutdown().get()
        try await group.shutdownGracefully()
    }

    @Test func subscriptionQueryMutationAuthAndServerRestart() async throws {
        try await withStrawberry(token: "secret") { server, transport, recorder in
            let payload = { (query: String) in ByteBuffer(string: #"{"query":\#(jsonString(query))}"#) }
            _ = try await transport.subscribe(
                kind: .subscription,
                payload: payload("subscription { tick(intervalMs: 50) }"),
                handler: recorder.handler(for: "s")
            ).get()
            _ = try await transport.subscribe(kind: .query, payload: payload("{ hello }"), handler: recorder.handler(for: "q")).get()
            _ = try await transport.subscribe(kind: .mutation, payload: payload("mutation { increment }"), handler: recorder.handler(for: "m")).get()
            await until("query and mutation answered, ticks flowing", on: recorder) {
                recorder.finish("q") == .completed && recorder.finish("m") == .completed && recorder.nexts("s").count >= 3
            }
            #expect(recorder.nexts("q") == [#"{"data":{"hello":"world"}}"#])
            #expect(recorder.nexts("m").first?.contains(#""increment":"#) == true)
            #expect(recorder.nexts("s").prefix(2) == [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#])

            // Restart the server in the middle of the live subscription.
            server.kill()
            await until("subscription reconnecting", on: recorder) { recorder.states("s").contains(.reconnecting) }
            let before = recorder.nexts("s").count  // nothing can arrive while the server is down
            try await server.start()
            await until("ticks again after restart", within: 20, on: recorder) {
                recorder.states("s").last == .active && recorder.nexts("s").count >= before + 2
            }
            #expect(recorder.nexts("s").dropFirst(before).first == #"{"data":{"tick":1}}"#)
            #expect(recorder.count(.reconnected) == 1)
        }
    }

    @Test func badTokenIsRejectedWith4403AndNotRetried() async throws {
        // The subscribe opens the connection. Had the transport been started first, a slow
        // subscribe could arrive after the 4403: a new subscribe on a failed upstream tries
        // once more, by design, and that second attempt is not a retry.
        try await withStrawberry(token: "wrong", startsTransport: false) { server, transport, recorder in
            _ = try await transport.subscribe(
                kind: .subscription,
                payload: ByteBuffer(string: #"{"query":"subscription { tick }"}"#),
                handler: recorder.handler(for: "s")
            ).get()
            await until("failed with 4403", on: recorder) { recorder.finish("s") != nil }
            guard case .error(.transport(.upstreamClosed(_, 4403, _))) = recorder.finish("s") else {
                Issue.record("expected UPSTREAM_CLOSED 4403, got \(String(describing: recorder.finish("s")))")
                return
            }
            #expect(try await transport.isQuiet.get(), "failed: no retry can come")
            try await Task.sleep(for: .milliseconds(600))  // three times the first backoff step
            let attempts = recorder.connectionStates.filter { if case .connecting = $0 { true } else { false } }
            #expect(attempts.count == 1, "states: \(recorder.connectionStates)")
            #expect(recorder.connectionStates.last.map { if case .failed(4403, _) = $0 { true } else { false } } == true)
        }
    }

    @Test func syntaxErrorClose4400IsBlamedOnTheBadSubscribe() async throws {
        try await withStrawberry(token: "secret") { server, transport, recorder in
            _ = try await transport.subscribe(
                kind: .subscription,
                payload: ByteBuffer(string: #"{"query":"subscription { tick }"}"#),
                handler: recorder.handler(for: "good")
            ).get()
            await until("good is ticking", on: recorder) { recorder.nexts("good").count >= 1 }
            // No wait past the blame window: only what was sent last (bad, alone) is suspect.
            _ = try await transport.subscribe(
                kind: .subscription,
                payload: ByteBuffer(string: #"{"query":"subscription { tick("}"#),
                handler: recorder.handler(for: "bad")
            ).get()
            await until("bad finished", on: recorder) { recorder.finish("bad") != nil }
            let closeCode: UInt16? = if case .error(.transport(.upstreamClosed(_, let code, _))) = recorder.finish("bad") { code?.code } else { nil }
            let upstreamError = if case .error(.upstream) = recorder.finish("bad") { true } else { false }
            // strawberry closes the whole connection with 4400; gqlmux blames the new subscribe.
            #expect(closeCode == 4400, "finish was \(String(describing: recorder.finish("bad"))), upstream error: \(upstreamError)")
            let before = recorder.nexts("good").count
            await until("good keeps ticking", on: recorder) { recorder.nexts("good").count >= before + 2 && recorder.states("good").last == .active }
            // On failure, the whole story: connection events and each operation's non-next updates.
            let story = { (key: String) in recorder.updates(key).filter { if case .next = $0 { false } else { true } } }
            #expect(recorder.finish("good") == nil, "events: \(recorder.events)\ngood: \(story("good"))\nbad: \(story("bad"))")
        }
    }
}
