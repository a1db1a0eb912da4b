import Foundation
import TestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// gqlmuxd under a real datagram NOTIFY_SOCKET, as systemd would run it.
@Suite(.serialized, .timeLimit(.minutes(5))) struct NotifyTests {
    func config(_ directory: String, url: String, extra: String = "") throws -> String {
        let path = directory + "/gqlmuxd.toml"
        try """
        [upstream]
        url = "\(url)"
        reconnect_interval = 0.2
        reconnect_max_interval = 0.5
        \(extra)
        [socket]
        path = "\(directory)/gqlmux.sock"
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(arguments: [false, true])
    func lifecycleIsReportedThroughNotifySocket(abstract: Bool) async throws {
        let server = TestUpstreamServer()
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-notify")
        let notify = try NotifySocket(abstract: abstract, directory: directory)
        let daemon = try Child(
            Paths.binary("gqlmuxd"),
            ["--config", try config(directory, url: server.url)],
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "200000"]
        )
        await until("READY=1", on: notify) { notify.lines.contains("READY=1") }
        await eventually("STATUS says connected") {
            notify.lines.contains { $0.hasPrefix("STATUS=connected to \(server.url); 0 clients, 0 subscriptions") }
        }
        await eventually("WATCHDOG=1 every 100 ms") { notify.lines.filter { $0 == "WATCHDOG=1" }.count >= 3 }

        // Upstream killed: STATUS tells the reconnect attempt, delay and cause.
        await server.stop()
        await eventually("STATUS reconnecting") {
            notify.lines.contains { $0.hasPrefix("STATUS=reconnecting in ") && $0.contains("(attempt 1)") }
        }
        try await server.start()
        await eventually("STATUS connected again") { notify.lines.filter { $0.hasPrefix("STATUS=connected to") }.count >= 2 }

        // A server's close reason reaches STATUS=: its CR and LF must not become commands of
        // their own (systemd splits at both; WATCHDOG=trigger would have it kill gqlmuxd).
        await server.closeAll(code: 1011, reason: "bye\rWATCHDOG=trigger\r\nSTOPPING=1\nFDSTOREREMOVE=1\u{2028}x")
        await until("STATUS with the reason", on: notify) { notify.lines.contains { $0.hasPrefix("STATUS=") && $0.contains("bye WATCHDOG=trigger") } }
        #expect(!notify.lines.contains("WATCHDOG=trigger") && !notify.lines.contains("STOPPING=1") && !notify.lines.contains("FDSTOREREMOVE=1"))
        #expect(notify.messages.allSatisfy { !$0.unicodeScalars.contains("\r") && !$0.unicodeScalars.contains("\u{2028}") })
        await eventually("STATUS connected once more") { notify.lines.filter { $0.hasPrefix("STATUS=connected to") }.count >= 3 }
        #expect(daemon.isRunning)

        // SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
        let readyBefore = notify.lines.filter { $0 == "READY=1" }.count
        daemon.signal(SIGHUP)
        await eventually("RELOADING then READY") {
            let lines = notify.lines
            guard let reloading = lines.lastIndex(of: "RELOADING=1") else { return false }
            return lines.filter { $0 == "READY=1" }.count == readyBefore + 1 && lines.lastIndex(of: "READY=1")! > reloading
        }
        let monotonic = notify.lines.first { $0.hasPrefix("MONOTONIC_USEC=") }
        #expect(monotonic.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) } != nil)

        // SIGTERM: STOPPING=1 and a clean exit.
        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == 0)
        #expect(notify.lines.contains("STOPPING=1"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/gqlmux.sock"))
        notify.close()
        await server.shutdown()
    }

    @Test func startupFailureSendsErrnoAndExitsNonZero() async throws {
        let directory = try Paths.temporaryDirectory("gqlmux-notify")
        let notify = try NotifySocket(abstract: false, directory: directory)
        try "[upstream]\nurl = \"http://wrong\"\n".write(toFile: directory + "/bad.toml", atomically: true, encoding: .utf8)
        let daemon = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/bad.toml"], environment: ["NOTIFY_SOCKET": notify.address])
        #expect(await daemon.wait() == 1)
        await eventually("ERRNO and STATUS") {
            notify.lines.contains("ERRNO=22") && notify.lines.contains { $0.hasPrefix("STATUS=failed: config") }
        }
        let stderrLines = daemon.stderr.split(separator: "\n")
        #expect(stderrLines == ["gqlmuxd: config \(directory)/bad.toml: [upstream] url: 'http://wrong' must start with ws:// or wss://"])
        notify.close()
    }
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct SocketActivationTests {
    @Test func adoptsTheListeningSocketFromSystemdSocketActivate() async throws {
        let activate = try #require(Paths.tool("systemd-socket-activate"), "systemd-socket-activate is not installed")
        let server = TestUpstreamServer()
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-activate")
        let socketPath = directory + "/activated.sock"
        try """
        [upstream]
        url = "\(server.url)"
        [socket]
        path = "\(directory)/not-used.sock"
        [metrics]
        listen = "127.0.0.1:0"
        """.write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        // systemd-socket-activate closes every inherited fd before exec, which confuses
        // Foundation's Process monitor: a shell in between keeps it. The shell tells the pid
        // (socket-activate execs gqlmuxd in place, so it is gqlmuxd's).
        let script = """
            '\(activate)' -l '\(socketPath)' '\(Paths.binary("gqlmuxd"))' --config '\(directory)/gqlmuxd.toml' &
            echo $! > '\(directory)/pid'
            wait $!
            """
        let launcher = try Child("/bin/bash", ["-c", script])
        // Within 30 s: beside the nspawn test and the rest of the suite on two cores, starting
        // bash and systemd-socket-activate once took more than 10.
        await eventually("socket bound by systemd-socket-activate", within: 30) { FileManager.default.fileExists(atPath: socketPath) }
        // The first connection starts gqlmuxd, which adopts fd 3.
        let reply = try await runCommand(Paths.binary("gqlmuxctl"), ["--socket", socketPath, "status", "--json"])
        #expect(reply.status == 0, "\(reply.output)")
        #expect(reply.output.contains(#""state":"#))
        // The connection that started gqlmuxd was waiting before it listened: it is answered
        // only once the daemon knows all its addresses.
        #expect(reply.output.contains(#""graphqlEndpoint":"\#(directory)/graphql.sock""#), "\(reply.output)")
        #expect(reply.output.contains(#""metrics":"127.0.0.1:"#), "\(reply.output)")
        #expect(launcher.stderr.contains("GQLMUX_SOCKET_ACTIVATED=yes"))
        #expect(launcher.stderr.contains("GQLMUX_SOCKET=\(socketPath)"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/not-used.sock"))
        let pid = try #require(Int32(try String(contentsOfFile: directory + "/pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(pid, SIGTERM)
        #expect(await launcher.wait() == 0)
        await server.shutdown()
    }
}
