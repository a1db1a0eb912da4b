import Foundation
import GQLMuxDaemon
import SystemdSupport
import Testing

@Suite struct UnitFileTests {
    @Test func unitsVerifyWithoutAnyOutput() async throws {
        let analyze = try #require(Paths.tool("systemd-analyze"), "systemd-analyze is not installed")
        let directory = try Paths.temporaryDirectory("gqlmux-units")
        // The shipped units, with ExecStart pointed at the built binary (it is not installed here).
        let service = try String(contentsOfFile: Paths.root + "/systemd/gqlmuxd.service", encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/gqlmuxd", with: Paths.binary("gqlmuxd"))
        try service.write(toFile: directory + "/gqlmuxd.service", atomically: true, encoding: .utf8)
        for socket in ["gqlmuxd.socket", "gqlmuxd-graphql.socket"] {
            try FileManager.default.copyItem(atPath: Paths.root + "/systemd/" + socket, toPath: directory + "/" + socket)
        }
        let result = try await runCommand(
            analyze,
            ["verify", directory + "/gqlmuxd.socket", directory + "/gqlmuxd-graphql.socket", directory + "/gqlmuxd.service"]
        )
        #expect(result.status == 0)
        #expect(result.output.isEmpty, "systemd-analyze verify printed: \(result.output)")
    }

    @Test func serviceExposureScoreIsAtMostOnePointFive() async throws {
        let analyze = try #require(Paths.tool("systemd-analyze"), "systemd-analyze is not installed")
        let result = try await runCommand(analyze, ["security", "--offline=true", Paths.root + "/systemd/gqlmuxd.service"])
        let line = try #require(result.output.split(separator: "\n").first { $0.contains("Overall exposure level") })
        let score = try #require(line.split(separator: " ").compactMap { Double($0) }.first)
        print("systemd-analyze security: \(line)")
        #expect(score <= 1.5)
    }

    @Test func catalogExplainsEveryEventWithItsMessageID() throws {
        let catalog = try String(contentsOfFile: Paths.root + "/systemd/gqlmuxd.catalog", encoding: .utf8)
        let ids = Set(catalog.split(separator: "\n").filter { $0.hasPrefix("-- ") }.map { String($0.dropFirst(3)) })
        for event in DaemonEvent.allCases {
            #expect(ids.contains(event.messageID), "no catalog entry for \(event.rawValue)")
            #expect(event.messageID.count == 32 && event.messageID.allSatisfy(\.isHexDigit))
        }
        #expect(Set(DaemonEvent.allCases.map(\.messageID)).count == DaemonEvent.allCases.count)
    }

    @Test(
        arguments: [
            ("GQLMUX_EVENT", "GQLMUX_EVENT"), ("peer.pid", "PEER_PID"), ("_hidden", "HIDDEN"), ("9lives", "F_9LIVES"),
            ("café-au-lait", "CAF__AU_LAIT"), ("___", nil),
        ] as [(String, String?)]
    )
    func metadataKeysBecomeValidJournalFieldNames(key: String, expected: String?) {
        #expect(JournalLogHandler.fieldName(key) == expected)
    }
}
