import Foundation
import TestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// gqlmuxctl against a real gqlmuxd: output format and exit codes a shell script relies on.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CLITests {
    @Test func outputAndExitCodes() async throws {
        let server = TestUpstreamServer()
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-cli")
        let socket = directory + "/gqlmux.sock"
        try "[upstream]\nurl = \"\(server.url)\"\n[socket]\npath = \"\(socket)\"\n"
            .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let daemon = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/gqlmuxd.toml"])
        await eventually("socket") { FileManager.default.fileExists(atPath: socket) }
        await until("upstream connected", upstream: server) { $0.connections == 1 }
        let ctl = Paths.binary("gqlmuxctl")

        let query = try await runCommand(ctl, ["--socket", socket, "query", "{ hello }"])
        #expect(query.status == 0)
        #expect(query.output == #"{"data":{"hello":"world"}}"# + "\n")

        let mutation = try await runCommand(ctl, ["query", "mutation { increment }", "--socket", socket])
        #expect(mutation.status == 0 && mutation.output.contains(#""increment":1"#))

        await server.setOptions { $0.tickInterval = nil }
        let subscribe = try Child(ctl, ["subscribe", "subscription { tick }", "--count", "2", "--socket", socket])
        await until("subscribed upstream", upstream: server) { $0.activeSubscriptions == 1 }
        await server.tick()
        await server.tick()
        #expect(await subscribe.wait() == 0)
        #expect(subscribe.stdout == #"{"data":{"tick":1}}"# + "\n" + #"{"data":{"tick":2}}"# + "\n")
        #expect(subscribe.stderr.contains("state: active"))

        let invalid = try await runCommand(ctl, ["--socket", socket, "query", "{ hello "])
        #expect(invalid.status == 1)
        #expect(invalid.output.contains("INVALID_DOCUMENT"))

        let status = try await runCommand(ctl, ["status", "--json", "--socket", socket])
        #expect(status.status == 0 && status.output.contains(#""state":"connected""#))

        let badVariables = try await runCommand(ctl, ["query", "{ hello }", "--variables", "[1]", "--socket", socket])
        #expect(badVariables.status == 64)

        let unreachable = try await runCommand(ctl, ["--socket", directory + "/none.sock", "status"])
        #expect(unreachable.status == 69)
        #expect(unreachable.output.contains("cannot connect to \(directory)/none.sock: No such file or directory"))

        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == 0)
        await server.shutdown()
    }

    /// Issue 10: `--json` on every verb that prints, and `subscribe --states`.
    @Test func jsonOnEveryVerbAndStatesOnStdout() async throws {
        let server = TestUpstreamServer()
        try await server.start()
        await server.setOptions { $0.tickInterval = nil }
        let daemon = try await DaemonProcess.start(upstream: server.url, prefix: "gqlmux-cli-json")
        defer { daemon.child.signal(SIGKILL) }
        let socket = daemon.socket
        let directory = daemon.directory
        let ctl = Paths.binary("gqlmuxctl")

        // Every stdout line parses as one JSON object; errors are JSON on stderr.
        func objects(_ text: String) -> [[String: Any]] {
            text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        let query = try Child(ctl, ["query", "{ hello }", "--json", "--socket", socket])
        #expect(await query.wait() == 0)
        #expect(objects(query.stdout).count == 1 && query.stdout.contains(#""hello":"world""#))

        let invalid = try Child(ctl, ["query", "{ hello ", "--json", "--socket", socket])
        #expect(await invalid.wait() == 1)
        let error = try #require(objects(invalid.stderr).first?["error"] as? [String: Any], "stderr: \(invalid.stderr)")
        #expect(error["code"] as? String == "INVALID_DOCUMENT")
        #expect((error["message"] as? String)?.isEmpty == false)

        let unreachable = try Child(ctl, ["status", "--json", "--socket", directory + "/none.sock"])
        #expect(await unreachable.wait() == 69)
        #expect((objects(unreachable.stderr).first?["error"] as? [String: Any])?["code"] as? String == "DAEMON_UNAVAILABLE")

        for verb in ["pause", "resume", "reload"] {
            let admin = try Child(ctl, [verb, "--json", "--socket", socket])
            #expect(await admin.wait() == 0, "\(verb): \(admin.stderr)")
            #expect(admin.stdout == #"{"ok":true}"# + "\n", "\(verb)")
        }

        let metrics = try Child(ctl, ["metrics", "--json", "--socket", socket])
        #expect(await metrics.wait() == 0)
        let samples = objects(metrics.stdout)
        #expect(samples.count == metrics.stdout.split(separator: "\n").count, "every line is JSON")
        #expect(samples.contains { $0["name"] as? String == "gqlmux_clients" && $0["value"] as? Int == 1 })

        // --states: lifecycle states as JSON lines on stdout between the results.
        let subscribe = try Child(ctl, ["subscribe", "subscription { tick }", "--count", "2", "--states", "--json", "--socket", socket])
        await until("subscribed upstream", upstream: server) { $0.activeSubscriptions == 1 }
        _ = await server.tick()
        _ = await server.tick()
        #expect(await subscribe.wait() == 0)
        let lines = objects(subscribe.stdout)
        #expect(lines.count == subscribe.stdout.split(separator: "\n").count, "every line is JSON: \(subscribe.stdout)")
        #expect(lines.first?["state"] as? String == "active", "\(subscribe.stdout)")
        #expect(lines.filter { $0["data"] != nil }.count == 2)
        #expect(subscribe.stderr.isEmpty, "--json keeps stderr for errors: \(subscribe.stderr)")

        #expect(await daemon.stop() == 0)
        await server.shutdown()
    }

    @Test func daemonAndCLIFindTheSocketThroughGQLMUX_SOCKET() async throws {
        let server = TestUpstreamServer()
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-cli-env")
        let socket = directory + "/from-env.sock"
        // No [socket] path and no --socket: only the environment names the socket.
        try "[upstream]\nurl = \"\(server.url)\"\n".write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let daemon = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/gqlmuxd.toml"], environment: ["GQLMUX_SOCKET": socket])
        await eventually("socket from GQLMUX_SOCKET") { FileManager.default.fileExists(atPath: socket) }
        let status = try Child(Paths.binary("gqlmuxctl"), ["status", "--json"], environment: ["GQLMUX_SOCKET": socket])
        #expect(await status.wait() == 0, "\(status.stderr)")
        #expect(status.stdout.contains(#""clients":1"#))
        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == 0)
        #expect(!FileManager.default.fileExists(atPath: socket))
        await server.shutdown()
    }
}

/// Issue 7, failure 4: out-of-range values refused at start (exit 1, one line naming the key),
/// and written into the file of a RUNNING gqlmuxd followed by SIGHUP or `gqlmuxctl reload`:
/// the daemon keeps its configuration and its streams, says why in STATUS, and never dies.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BadConfigurationTests {
    static let badValues = [
        "ping_interval = 1e10", "pong_timeout = 1e300", "reconnect_interval = nan", "reconnect_interval = inf",
        "max_message_bytes = 5000000000",
    ]

    @Test func outOfRangeValuesStopTheStartWithOneLineNamingTheKey() async throws {
        let directory = try Paths.temporaryDirectory("gqlmux-range")
        for value in Self.badValues {
            try "[upstream]\nurl = \"ws://127.0.0.1:9/graphql\"\n\(value)\n[socket]\npath = \"\(directory)/s.sock\"\n"
                .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
            let daemon = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/gqlmuxd.toml"])
            #expect(await daemon.wait() == 1, "for \(value)")
            let key = String(value.prefix { $0 != " " })
            #expect(daemon.stderr.contains("[upstream] \(key)") && daemon.stderr.contains("out of range"), "for \(value): \(daemon.stderr)")
        }
    }

    @Test func aBadReloadKeepsTheRunningDaemonAndItsStreams() async throws {
        let server = TestUpstreamServer()
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-reload")
        let socket = directory + "/gqlmux.sock"
        let good = "[upstream]\nurl = \"\(server.url)\"\n[socket]\npath = \"\(socket)\"\n"
        try good.write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let daemon = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/gqlmuxd.toml"])
        await until("upstream connected", upstream: server) { $0.connections == 1 }
        let ctl = Paths.binary("gqlmuxctl")
        let subscriber = try Child(ctl, ["subscribe", "subscription { tick }", "--count", "2", "--socket", socket])
        await until("subscribed upstream", upstream: server) { $0.activeSubscriptions == 1 }
        await server.tick()
        for (index, value) in Self.badValues.enumerated() {
            try good.replacingOccurrences(of: "[socket]", with: "\(value)\n[socket]")
                .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
            if index % 2 == 0 {
                daemon.signal(SIGHUP)
            } else {
                let reload = try await runCommand(ctl, ["reload", "--socket", socket])
                #expect(reload.status == 1, "for \(value)")
                #expect(reload.output.contains("out of range"), "for \(value): \(reload.output)")
            }
            let key = String(value.prefix { $0 != " " })
            await eventually("STATUS names \(key)") {
                let status = try? await runCommand(ctl, ["status", "--json", "--socket", socket])
                return status?.output.contains("reload") == true && status?.output.contains(key) == true
            }
        }
        try good.write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let reload = try await runCommand(ctl, ["reload", "--socket", socket])
        #expect(reload.status == 0)
        let status = try await runCommand(ctl, ["status", "--json", "--socket", socket])
        #expect(status.output.contains(#""reloadError":null"#))
        await until("resubscribed after the good reload", upstream: server) { $0.activeSubscriptions == 1 }
        await server.tick()
        #expect(await subscriber.wait() == 0)  // both ticks arrived: the stream survived every bad reload
        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == 0)
        await server.shutdown()
    }
}
