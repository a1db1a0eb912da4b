import Foundation
import GQLMuxVocabulary
import NIOCore
import Testing
import Upstream

@testable import GQLMuxDaemon

/// `status`, `STATUS=` and the metrics read one value; its two texts, from values alone.
@Suite struct StatusReportTests {
    private func report(_ upstream: UpstreamSnapshot, reloadError: String? = nil) -> StatusReport {
        StatusReport(
            version: "9.9.9",
            upstream: upstream,
            reloadError: reloadError,
            metricsAddress: "127.0.0.1:9400",
            endpointAddresses: ["/run/gqlmux/graphql.sock", "http://127.0.0.1:4000/graphql"],
            clients: 3,
            localSubscriptions: 7,
            upstreamSubscriptions: 2,
            messagesIn: 11,
            messagesOut: 44,
            bufferedOutbound: 100,
            bufferedInbound: 5,
            retained: 7,
            bufferLimit: 1000
        )
    }

    private func pool(_ states: [ConnectionState]) -> UpstreamSnapshot {
        UpstreamSnapshot(
            state: states.contains(.connected) ? .connected : states[0],
            transport: "websocket",
            url: "wss://api.example/graphql",
            wire: "graphql-ws",
            connections: states.enumerated().map { .init(index: $0, state: $1, operations: 100, wire: "graphql-ws") },
            httpURL: nil,
            reconnects: 4,
            streams: nil
        )
    }

    @Test func theLineNamesTheUpstreamTheClientsAndTheConnectionsOverOne() {
        #expect(report(pool([.connected])).line == "connected to wss://api.example/graphql; 3 clients, 7 subscriptions (2 upstream)")
        #expect(
            report(pool([.connected, .idle, .connected])).line
                == "connected to wss://api.example/graphql; 3 clients, 7 subscriptions (2 upstream over 3 connections)"
        )
        let stalled = pool([.reconnecting(attempt: 2, delay: .milliseconds(1500), cause: .network("connection refused"))])
        #expect(report(stalled).line == "reconnecting in 1.5s (attempt 2): connection refused")
        #expect(report(pool([.paused]), reloadError: "bad key").line == "paused; last reload failed (configuration kept): bad key")
    }

    /// What a server wrote about one identity's lane (a close reason that may name its
    /// credential or user) reaches an admin only: not STATUS=, not another user's `status`.
    @Test func anIdentitysServerTextIsShownToAnAdminOnly() throws {
        let closed = ConnectionState.reconnecting(attempt: 1, delay: .seconds(1), cause: .closed(code: 4403, reason: "invalid token eyJsecret"))
        let failed = ConnectionState.failed(closeCode: 4403, reason: "user alice: quota")
        for state in [closed, failed] {
            var value = report(pool([state]))
            value.upstreams = [.init(name: "default", identity: "client", snapshot: pool([state]), identities: [("0123456789ab", pool([state]))])]
            for text in [value.line, String(buffer: value.json())] {
                #expect(!text.contains("eyJsecret") && !text.contains("alice"), "\(text)")
                #expect(text.contains("upstream closed 4403"), "the code is still told: \(text)")
            }
            let admin = String(buffer: value.json(wholeURLs: true))
            #expect(admin.contains("eyJsecret") || admin.contains("user alice: quota"), "an admin reads it whole")
            // The host's own lane keeps its reason for everyone, as before.
            value.upstreams[0].identity = "host"
            #expect(value.line.contains("invalid token eyJsecret") || value.line.contains("user alice: quota"))
        }
    }

    @Test func severalUpstreamsAreSummedUpThenNamedEach() {
        var value = report(pool([.connected]))
        let down = pool([.reconnecting(attempt: 1, delay: .seconds(1), cause: .network("refused"))])
        value.upstreams = [
            .init(name: "default", identity: "host", snapshot: pool([.connected])),
            .init(name: "telemetry", identity: "host", snapshot: down),
            .init(name: "accounts", identity: "client", snapshot: pool([.connected]), identities: [("0123456789ab", pool([.connected]))]),
        ]
        #expect(
            value.line
                == "3 upstreams: 2 connected, 1 reconnecting; default connected, telemetry reconnecting, accounts connected; 3 clients, 7 subscriptions (2 upstream)"
        )
        var withHealth = value
        withHealth.health[StatusReport.healthKey(upstream: "default", identity: nil)] = StatusReport.Health(
            pingRTT: 0.0123456,
            keepAliveGap: nil,
            lastMessageAge: 2
        )
        #expect(String(buffer: withHealth.json()).contains(#""identity":"host","pingRTT":0.012346,"keepAliveGap":null,"lastMessageAge":2,"#))
        let json = String(buffer: value.json())
        #expect(json.contains(#""upstreams":{"default":{"state":"connected""#))
        #expect(
            json.contains(
                #""identity":"client","subscriptions":{"local":0,"upstream":0},"identities":[{"id":"0123456789ab","state":"connected","connections":1,"reconnects":4,"pingRTT":null,"keepAliveGap":null,"lastMessageAge":null}]"#
            )
        )
        // One upstream: the line it always was.
        value.upstreams = [value.upstreams[0]]
        #expect(value.line == "connected to wss://api.example/graphql; 3 clients, 7 subscriptions (2 upstream)")
    }

    @Test func anHTTPStreamingUpstreamIsNamedByItsTransport() {
        let streams = UpstreamSnapshot(
            state: .connected,
            transport: "multipart",
            url: "https://api.example/graphql",
            wire: "multipart",
            connections: [.init(index: 0, state: .connected, operations: 2, wire: "multipart")],
            httpURL: "https://api.example/graphql",
            reconnects: 0,
            streams: 2
        )
        #expect(report(streams).line == "connected to https://api.example/graphql (multipart); 3 clients, 7 subscriptions (2 upstream)")
    }

    @Test func theStatusAnswerCarriesEveryDocumentedField() throws {
        let buffer = report(pool([.connected, .idle])).json()
        let json = try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
        let upstream = try #require(json["upstream"] as? [String: Any])
        #expect(upstream["state"] as? String == "connected")
        #expect(upstream["url"] as? String == "wss://api.example/graphql")
        #expect(upstream["protocol"] as? String == "graphql-ws")
        #expect(upstream["reconnects"] as? Int == 4)
        #expect(upstream["streams"] == nil)
        let connections = try #require(upstream["connections"] as? [[String: Any]])
        #expect(connections.map { $0["state"] as? String } == ["connected", "idle"])
        #expect(json["clients"] as? Int == 3)
        #expect((json["subscriptions"] as? [String: Int]) == ["local": 7, "upstream": 2])
        #expect((json["messages"] as? [String: Int]) == ["in": 11, "out": 44])
        #expect((json["buffers"] as? [String: Int]) == ["outbound": 100, "inbound": 5, "retained": 7, "limit": 1000])
        #expect(json["graphqlEndpoint"] as? String == "/run/gqlmux/graphql.sock http://127.0.0.1:4000/graphql")
    }
}
