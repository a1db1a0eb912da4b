import Foundation
import GQLMuxDaemon
import TestUpstream
import Testing

/// A reload is all or nothing: whichever step fails (the file, the connecting payload file, a
/// CA file for the WebSocket or for `http_url`), the running configuration is kept whole (limits,
/// security lists, headers, payload, URL, HTTP settings), the reload is refused with the reason,
/// `reload_failed` is logged, `status` shows `reloadError`, and the connection is not touched.
@Suite(.serialized) struct ReloadAllOrNothingTests {
    /// One failure point: the new file's `[upstream]` lines, and words the reason must contain.
    struct FailurePoint: Sendable, CustomTestStringConvertible {
        var name: String
        var upstream: @Sendable (_ port: Int, _ directory: String) -> String
        var reason: String
        var testDescription: String { name }
    }

    static let failurePoints: [FailurePoint] = [
        .init(name: "TOML syntax", upstream: { port, _ in "url = \"ws://127.0.0.1:\(port)/graphql\"\nlazy = tru" }, reason: "TOML syntax error"),
        .init(name: "value out of range", upstream: { port, _ in "url = \"ws://127.0.0.1:\(port)/graphql\"\nping_interval = -3" }, reason: "ping_interval"),
        .init(
            name: "unreadable CA file for wss://",
            upstream: { port, dir in "url = \"wss://127.0.0.1:\(port)/graphql\"\n[upstream.tls]\nca_file = \"\(dir)/missing-ca.pem\"" },
            reason: "[upstream.tls] ca_file"
        ),
        .init(
            name: "unreadable CA file for an https:// http_url",
            upstream: { port, dir in
                "url = \"ws://127.0.0.1:\(port)/graphql\"\nhttp_url = \"https://127.0.0.1:\(port)/graphql\"\n[upstream.tls]\nca_file = \"\(dir)/missing-ca.pem\""
            },
            reason: "[upstream.tls] ca_file"
        ),
        .init(
            name: "missing connecting_payload_file",
            upstream: { port, dir in "url = \"ws://127.0.0.1:\(port)/graphql\"\nconnecting_payload_file = \"\(dir)/missing.json\"" },
            reason: "connecting_payload_file"
        ),
        .init(
            name: "connecting_payload_file not a JSON object",
            upstream: { port, dir in "url = \"ws://127.0.0.1:\(port)/graphql\"\nconnecting_payload_file = \"\(dir)/array.json\"" },
            reason: "does not hold a JSON object"
        ),
        // The reason reaches STATUS=, which every local user reads: a URL's user info and query
        // string (where some servers take a key) are never in it.
        .init(
            name: "a URL with user info",
            upstream: { port, _ in "url = \"ws://user:secret@127.0.0.1:\(port)/graphql\"" },
            reason: "the URL has user info"
        ),
        .init(name: "a URL with a bad port and a key", upstream: { _, _ in "url = \"ws://127.0.0.1:0/graphql?apikey=secret\"" }, reason: "invalid port"),
    ]

    @Test(arguments: failurePoints)
    func aReloadThatFailsAnywhereChangesNothing(point: FailurePoint) async throws {
        try await DaemonRig.with(upstreamConfig: "connecting_payload = { token = \"one\" }\n[upstream.headers]\nAuthorization = \"Bearer one\"") { rig in
            try "[1, 2]".write(toFile: rig.directory + "/array.json", atomically: true, encoding: .utf8)
            let c = try await rig.connect()
            c.subscribe(id: "a")
            c.subscribe(id: "b", "subscription Other { tick }")
            await rig.upstreamActive(2)
            let connections = await rig.server.currentStats.connections
            let port = try #require(URL(string: rig.server.url)?.port)
            // Everything else in the new file would change something observable.
            let broken = """
                [upstream]
                \(point.upstream(port, rig.directory))
                [upstream.headers]
                Authorization = "Bearer two"
                [socket]
                path = "\(rig.socketPath)"
                [limits]
                max_operations_per_client = 2
                [security]
                admin_uids = [4242]
                """
            try broken.write(toFile: rig.configPath, atomically: true, encoding: .utf8)
            c.send(#"{"type":"reload","id":"r"}"#)
            await until("reload answered", on: c) { !c.lines(containing: #""id":"r""#).isEmpty }
            let answer = try #require(c.lines(containing: #""id":"r""#).first)
            #expect(answer.contains(#""type":"error""#) && answer.contains(point.reason), "\(answer)")
            #expect(rig.log.count(.reloadFailed) == 1)
            #expect(rig.log.all(.reloadFailed).first?["GQLMUX_ERROR"]?.contains(point.reason) == true)
            c.send(#"{"type":"status","id":"s"}"#)
            await until("status", on: c) { !c.lines(containing: #""id":"s""#).isEmpty }
            let status = try #require(c.lines(containing: #""id":"s""#).first)
            #expect(status.contains(#""reloadError":""#) && status.contains(point.reason), "\(status)")
            for told in [answer, status, rig.log.all(.reloadFailed).first?["GQLMUX_ERROR"] ?? ""] {
                #expect(!told.contains("secret"), "\(told)")
            }
            #expect(status.contains(#""url":"\#(rig.server.url)""#) && status.contains(#""httpURL":null"#), "URL and HTTP settings kept")
            // The old limit (1000 operations per client) still holds: a third operation is fine.
            c.subscribe(id: "c", "subscription Third { tick }")
            await rig.upstreamActive(3)
            #expect(c.lines(containing: "LIMIT_EXCEEDED").isEmpty)
            // Not reconnected: the old headers and payload are still the connection's.
            #expect(await rig.server.currentStats.connections == connections)
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"one"}"#)
            #expect(await rig.server.currentStats.lastRequestHeaders["authorization"] == "Bearer one")
            await rig.server.tick()
            await until("every subscription still ticks", on: c) { c.lines(containing: #""tick":1"#).count == 3 }
            #expect(c.lines(containing: #""type":"error""#).count == 1)  // the reload's, nothing else

            // The same file, fixed: the reload applies it whole, and the error is cleared.
            let fixed = broken.replacingOccurrences(
                of: point.upstream(port, rig.directory),
                with: "url = \"\(rig.server.url)\"\nconnecting_payload = { token = \"two\" }"
            )
            try fixed.write(toFile: rig.configPath, atomically: true, encoding: .utf8)
            c.send(#"{"type":"reload","id":"r2"}"#)
            await until("fixed reload ok", on: c) { c.lines.contains(#"{"type":"ok","id":"r2"}"#) }
            await until("reconnected with the new credentials", upstream: rig.server) { stats in
                stats.lastInitPayload == #"{"token":"two"}"# && stats.activeSubscriptions == 3
            }
            #expect(await rig.server.currentStats.lastRequestHeaders["authorization"] == "Bearer two")
            c.subscribe(id: "d", "subscription Fourth { tick }")
            await until("the new limit holds", on: c) { !c.lines(containing: "LIMIT_EXCEEDED").isEmpty }
            c.send(#"{"type":"status","id":"s2"}"#)
            await until("status 2", on: c) { !c.lines(containing: #""id":"s2""#).isEmpty }
            #expect(c.lines(containing: #""id":"s2""#).first?.contains(#""reloadError":null"#) == true)
        }
    }
}
