import Foundation
import GQLMuxDaemon
import TestUpstream
import Testing

/// Runs `arguments` through `/usr/bin/env` with `stdin`: its exit status, stdout and stderr.
func run(_ arguments: [String], stdin: String = "") async throws -> (status: Int32, output: String) {
    try await runCommand("/usr/bin/env", arguments, stdin: .bytes(Array(stdin.utf8)), seconds: 20)
}

@Suite(.serialized) struct LimitsAndSecurityTests {
    @Test func maxClientsRefusesTheNextClient() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nmax_clients = 2") { rig in
            let a = try await rig.connect()
            let b = try await rig.connect()
            a.send(#"{"type":"ping"}"#)
            b.send(#"{"type":"ping"}"#)
            await until("two served", on: a, b) { a.lines.count == 1 && b.lines.count == 1 }
            let c = try await rig.connect()
            await until("third refused", on: c) { c.isClosed }
            #expect(c.lines.first?.contains(#""extensions":{"code":"LIMIT_EXCEEDED","limit":"max_clients"}"#) == true, "\(c.lines)")
            #expect(!a.isClosed && !b.isClosed)
        }
    }

    @Test func maxOperationsPerClientIsEnforcedPerOperation() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nmax_operations_per_client = 2") { rig in
            let c = try await rig.connect()
            c.subscribe(id: "1")
            c.subscribe(id: "2", "subscription { tick }  # different text, same key")
            c.subscribe(id: "3")
            await until("third refused", on: c) { !c.lines(containing: "LIMIT_EXCEEDED").isEmpty }
            #expect(c.lines(containing: "LIMIT_EXCEEDED").first?.contains(#""id":"3""#) == true)
            #expect(c.lines(containing: "LIMIT_EXCEEDED").first?.contains(#""limit":"max_operations_per_client""#) == true)
            #expect(!c.isClosed)
        }
    }

    @Test func peersOutsideAllowedUIDsAreRefusedWithForbidden() async throws {
        try await DaemonRig.with(socketConfig: "mode = \"0666\"", extraConfig: "[security]\nallowed_uids = [4242]") { rig in
            let refused = try await run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "socat", "-t", "2", "-", "UNIX-CONNECT:\(rig.socketPath)"],
                stdin: #"{"type":"ping"}"# + "\n"
            )
            #expect(refused.output.contains("FORBIDDEN"), "output: \(refused.output)")
            #expect(rig.log.count(.clientRefused) == 1)
        }
    }

    @Test func allowedAndAdminGIDsMatchSupplementaryGroups() async throws {
        // Users added with `usermod -aG`: the group is supplementary, the primary one is their own.
        let config = "[security]\nallowed_gids = [4343]\nadmin_gids = [4343]"
        try await DaemonRig.with(socketConfig: "mode = \"0666\"", extraConfig: config) { rig in
            func asNobody(groups: String, _ lines: String) async throws -> String {
                try await run(
                    ["setpriv", "--reuid=65534", "--regid=65534", "--groups=\(groups)", "socat", "-t", "2", "-", "UNIX-CONNECT:\(rig.socketPath)"],
                    stdin: lines
                ).output
            }
            let member = try await asNobody(groups: "100,4343,5000", #"{"type":"pause","id":"p"}"# + "\n" + #"{"type":"resume","id":"r"}"# + "\n")
            #expect(member.contains(#"{"type":"ok","id":"p"}"#) && member.contains(#"{"type":"ok","id":"r"}"#), "output: \(member)")
            #expect(!member.contains("FORBIDDEN"), "output: \(member)")
            let outsider = try await asNobody(groups: "100,4344", #"{"type":"ping"}"# + "\n")
            #expect(outsider.contains("FORBIDDEN"), "output: \(outsider)")
            #expect(rig.log.count(.clientRefused) == 1)
        }
    }

    @Test func adminVerbsNeedAnAdmin() async throws {
        try await DaemonRig.with(socketConfig: "mode = \"0666\"") { rig in
            let nobody = try await run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "socat", "-t", "2", "-", "UNIX-CONNECT:\(rig.socketPath)"],
                stdin: #"{"type":"pause","id":"p"}"# + "\n" + #"{"type":"status","id":"s"}"# + "\n"
            )
            #expect(nobody.output.contains(#"{"type":"error","id":"p""#) && nobody.output.contains("FORBIDDEN"), "output: \(nobody.output)")
            #expect(nobody.output.contains(#""type":"status""#))
            // Root (uid 0) may.
            let c = try await rig.connect()
            c.send(#"{"type":"pause","id":"p"}"#)
            await until("ok", on: c) { c.lines == [#"{"type":"ok","id":"p"}"#] }
            await until("upstream closed", upstream: rig.server) { $0.openConnections == 0 }
            c.send(#"{"type":"resume","id":"r"}"#)
            await until("resumed", upstream: rig.server) { $0.openConnections == 1 }
        }
    }

    @Test func socketFileHasModeFromConfigAndStaleFileIsReplaced() async throws {
        try await DaemonRig.with() { rig in
            let mode = try FileManager.default.attributesOfItem(atPath: rig.socketPath)[.posixPermissions] as? Int
            #expect(mode == 0o660)
            await rig.stopDaemon()
            #expect(!FileManager.default.fileExists(atPath: rig.socketPath))
            // A stale socket file (bound, nobody listening) from a crashed run is replaced.
            let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(rig.socketPath.utf8)) }
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            close(stale)
            #expect(FileManager.default.fileExists(atPath: rig.socketPath))
            try await rig.restartDaemon()
            let c = try await rig.connect()
            c.send(#"{"type":"ping"}"#)
            await until("served", on: c) { c.lines.count == 1 }
        }
    }
}
