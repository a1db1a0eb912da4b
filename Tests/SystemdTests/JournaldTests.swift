import Foundation
import TestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real systemd-journald in a private mount namespace; gqlmuxd's entries read back with journalctl.
@Suite(.serialized, .timeLimit(.minutes(5))) struct JournaldTests {
    static var journaldAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd-journald") && Paths.tool("unshare") != nil
            && Paths.tool("journalctl") != nil && getuid() == 0
    }

    @Test(.enabled(if: journaldAvailable, "needs root, unshare and systemd-journald"))
    func eventsAreNativeJournalEntriesWithoutSecrets() async throws {
        var options = TestUpstreamServer.Options()
        options.tickInterval = .milliseconds(100)
        options.requiredToken = "SECRET-PAYLOAD-456"
        let server = TestUpstreamServer(options: options)
        try await server.start()
        let directory = try Paths.temporaryDirectory("gqlmux-journal")
        let socket = directory + "/gqlmux.sock"
        try """
        [upstream]
        url = "\(server.url)"
        connecting_payload = { token = "SECRET-PAYLOAD-456" }
        ping_interval = 0.2
        [upstream.headers]
        Authorization = "Bearer SECRET-HEADER-123"
        [socket]
        path = "\(socket)"
        [log]
        target = "journal"
        level = "debug"
        """.write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)

        let run = try Child(
            Paths.tool("unshare")!,
            [
                "-m", "--propagation", "private", "/bin/bash", Paths.root + "/scripts/journald-test.sh",
                directory, directory + "/gqlmuxd.toml", socket, Paths.binDir,
            ]
        )
        let status = await run.wait(seconds: 60)
        await server.shutdown()
        let read = { (name: String) in (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "" }
        #expect(status == 0, "script failed: \(run.stderr) \(read("error")) \(read("journald.log"))")
        #expect(read("subscribe.out").split(separator: "\n").count == 2)

        let entries = read("all.json").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let events = Set(entries.compactMap { $0["GQLMUX_EVENT"] as? String })
        for expected in [
            "started", "connecting", "connected", "client_connected", "subscribed", "client_disconnected", "completed", "stopping", "ping", "pong",
        ] {
            #expect(events.contains(expected), "no \(expected) entry; got \(events.sorted())")
        }
        let connected = try #require(
            read("connected.json").split(separator: "\n").first.flatMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        )
        #expect(connected["SYSLOG_IDENTIFIER"] as? String == "gqlmuxd")
        #expect(connected["MESSAGE_ID"] as? String == "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a03")
        #expect(connected["PRIORITY"] as? String == "5")
        #expect(connected["GQLMUX_URL"] as? String == server.url)
        #expect((connected["CODE_FILE"] as? String)?.hasSuffix("UpstreamEventLog.swift") == true)
        #expect(Int(connected["CODE_LINE"] as? String ?? "") != nil)
        #expect((connected["CODE_FUNC"] as? String)?.isEmpty == false)
        #expect(connected["MESSAGE"] as? String == "connected to \(server.url) (graphql-transport-ws)")
        #expect(connected["GQLMUX_PROTOCOL"] as? String == "graphql-transport-ws")
        #expect(connected["GQLMUX_CONNECTION"] as? String == "0")
        let pings = entries.filter { $0["GQLMUX_EVENT"] as? String == "ping" }
        #expect(!pings.isEmpty && pings.allSatisfy { $0["PRIORITY"] as? String == "7" })
        // Field names are valid journal fields; no secret reaches any field.
        for entry in entries {
            for key in entry.keys { #expect(key.allSatisfy { $0.isUppercase || $0.isNumber || $0 == "_" }, "\(key)") }
        }
        let everything = read("all.json") + read("verbose.txt")
        #expect(!everything.contains("SECRET-PAYLOAD-456"))
        #expect(!everything.contains("SECRET-HEADER-123"))
        print("journalctl -o verbose excerpt:\n" + read("verbose.txt").split(separator: "\n").prefix(24).joined(separator: "\n"))
    }
}
