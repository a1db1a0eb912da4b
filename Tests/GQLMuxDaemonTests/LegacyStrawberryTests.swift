import Foundation
import GQLMuxDaemon
import NIOPosix
import TestUpstream
import Testing

/// Issue 8: strawberry with ONLY the legacy graphql-ws protocol enabled (as Apollo Server 2/3
/// and Hasura setups are), through the daemon with `protocol = "auto"` (the default).
@Suite(.serialized, .timeLimit(.minutes(5))) struct LegacyStrawberryTests {
    @Test func autoSelectsTheLegacyProtocolAndSubscriptionsSurviveARestart() async throws {
        try await StrawberryRig.with(protocols: "legacy", upstream: { _ in #"connecting_payload = { token = "secret" }"# }) { strawberry, rig in
            await until("connected to strawberry over graphql-ws", within: 15, on: rig.log) { rig.log.count(.connected) == 1 }
            #expect(rig.log.all(.connected).first?["GQLMUX_PROTOCOL"] == "graphql-ws")

            let clients = try await [LineClient.connect(rig.socket, group: rig.group), LineClient.connect(rig.socket, group: rig.group)]
            for (i, client) in clients.enumerated() { client.subscribe(id: "t\(i)", "subscription { tick(intervalMs: 50) }") }
            await eventually("both clients receive ticks (data → next)") {
                clients.allSatisfy { $0.lines(containing: #""type":"next""#).count >= 3 }
            }
            let status = await rig.status(clients[0])
            #expect(status.contains(#""protocol":"graphql-ws""#), "\(status)")
            #expect(status.contains(#""subscriptions":{"local":2,"upstream":1}"#), "\(status)")

            // strawberry's legacy handler runs subscriptions only: its error reaches the client as
            // an array of errors (queries need http_url there, below).
            clients[0].subscribe(id: "q", "{ hello }")
            await until("the query's error", on: clients[0]) { !clients[0].lines(containing: #""type":"error","id":"q""#).isEmpty }
            #expect(clients[0].lines(containing: #""id":"q""#).last?.contains(#""payload":[{"#) == true)

            // SIGKILL and restart in the middle: reconnecting, then `start` again and ticks go on.
            strawberry.kill()
            await eventually("reconnecting told") { clients.allSatisfy { !$0.lines(containing: #""state":"reconnecting""#).isEmpty } }
            let counts = clients.map { $0.lines(containing: #""type":"next""#).count }
            try await strawberry.start()
            await eventually("ticks again after the restart", within: 20) {
                zip(clients, counts).allSatisfy { client, before in client.lines(containing: #""type":"next""#).count >= before + 2 }
            }
            #expect(rig.log.count(.reconnected) == 1)
        }
    }

    @Test func aWrongTokenIsAConnectionErrorAndTheTransportFailsWithoutRetrying() async throws {
        try await StrawberryRig.with(protocols: "legacy", upstream: { _ in "protocol = \"graphql-ws\"\nconnecting_payload = { token = \"wrong\" }" }) {
            _,
            rig in
            await until("failed", within: 15, on: rig.log) { rig.log.count(.failed) == 1 }
            let reason = rig.log.all(.failed).first?["GQLMUX_REASON"] ?? ""
            #expect(reason.hasPrefix("connection_error"), "\(reason)")
            #expect(rig.log.count(.connecting) == 1, "one attempt, no hot loop")
            #expect(rig.log.count(.reconnecting) == 0)
            let client = try await LineClient.connect(rig.socket, group: rig.group)
            let status = await rig.status(client)
            #expect(status.contains(#""state":"failed""#), "\(status)")
        }
    }

    @Test func withHTTPURLQueriesAndMutationsWorkWhileTheSocketIsPausedAndAMutationRunsOnce() async throws {
        try await StrawberryRig.with(
            protocols: "legacy",
            upstream: { "connecting_payload = { token = \"secret\" }\nhttp_url = \"\(Self.httpURL($0))\"" }
        ) { strawberry, rig in
            let httpURL = Self.httpURL(strawberry)
            await until("connected", within: 15, on: rig.log) { rig.log.count(.connected) == 1 }
            let client = try await LineClient.connect(rig.socket, group: rig.group)
            client.subscribe(id: "q", "{ hello }")
            await until("the query answered over HTTP", on: client) {
                client.lines.contains(#"{"type":"next","id":"q","payload":{"data":{"hello":"world"}}}"#)
                    && client.lines.contains(#"{"type":"complete","id":"q"}"#)
            }
            let status = await rig.status(client)
            #expect(status.contains(#""httpURL":"\#(httpURL)""#), "\(status)")

            // Pause the WebSocket: queries and mutations still go over HTTP.
            client.send(#"{"type":"pause","id":"p"}"#)
            await until("paused", on: client) { client.lines.contains(#"{"type":"ok","id":"p"}"#) }
            #expect(await rig.status(client).contains(#""state":"paused""#))
            client.subscribe(id: "before", "{ count }")
            await until("count read", on: client) { !client.lines(containing: #""id":"before","payload""#).isEmpty }
            let before = try #require(Self.number(client.lines(containing: #""id":"before","payload""#).first, "count"))
            client.subscribe(id: "m", "mutation { increment }")
            await until("the mutation answered", on: client) { !client.lines(containing: #""id":"m","payload""#).isEmpty }
            #expect(Self.number(client.lines(containing: #""id":"m","payload""#).first, "increment") == before + 1)
            client.subscribe(id: "after", "{ count }")
            await until("count read again", on: client) { !client.lines(containing: #""id":"after","payload""#).isEmpty }
            #expect(Self.number(client.lines(containing: #""id":"after","payload""#).first, "count") == before + 1, "the server ran it once")

            // A GraphQL error over HTTP is the result's errors, as over the socket.
            client.subscribe(id: "bad", "{ nope }")
            await until("the error result", on: client) { !client.lines(containing: #""id":"bad""#).isEmpty }
            #expect(client.lines(containing: #""id":"bad""#).first?.contains(#""errors":"#) == true)
        }
    }

    static func httpURL(_ strawberry: StrawberryServer) -> String {
        strawberry.url.replacingOccurrences(of: "ws://", with: "http://")
    }

    /// `"name":N` in a `next` line's data.
    static func number(_ line: String?, _ name: String) -> Int? {
        guard let line, let range = line.range(of: "\"\(name)\":") else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }
}
