import Foundation
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOPosix
import TestUpstream
import Testing

@testable import Upstream

/// A private CA and a server certificate for 127.0.0.1, made with the openssl CLI.
struct PrivateCA {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var certificate: String { directory + "/server.pem" }
    var key: String { directory + "/server.key" }

    static func make() throws -> PrivateCA {
        let directory = try makeTemporaryDirectory("gqlmux-tls")
        let script = """
            set -e
            cd '\(directory)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=gqlmux test CA' 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=127.0.0.1' 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf 2>/dev/null
            """
        let child = try ChildProcess("/bin/sh", ["-c", script])
        guard child.waitBlocking() == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: child.stderr]) }
        return PrivateCA(directory: directory)
    }
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct TLSTests {
    @Test func wssWithAPrivateCAFromCaFile() async throws {
        let ca = try PrivateCA.make()
        var options = TestUpstreamServer.Options()
        options.tls = (ca.certificate, ca.key)
        try await Rig.with(server: options, configure: { $0.tls.caFile = ca.caFile }) { rig in
            #expect(rig.server.url.hasPrefix("wss://"))
            rig.transport.start()
            try await rig.subscribe(key: "s")
            await until("active over TLS", on: rig.recorder) { rig.recorder.states("s").last == .active }
            await until("subscribed upstream", upstream: rig.server) { $0.activeSubscriptions == 1 }  // read by the server
            await rig.server.tick()
            await until("tick over TLS", on: rig.recorder) { rig.recorder.nexts("s") == [#"{"data":{"tick":1}}"#] }
        }
    }

    @Test func certificateVerificationIsOnByDefault() async throws {
        let ca = try PrivateCA.make()
        var options = TestUpstreamServer.Options()
        options.tls = (ca.certificate, ca.key)
        try await Rig.with(server: options) { rig in
            rig.transport.start()
            await eventually("refused: untrusted certificate") {
                rig.recorder.connectionStates.contains { if case .reconnecting = $0 { true } else { false } }
            }
            let causes = rig.recorder.connectionStates.compactMap { if case .reconnecting(_, _, let c) = $0 { c.description } else { nil } }
            let cause = try #require(causes.first, "no refused connection was reported within the wait")
            print("untrusted certificate cause: \(cause)")
            #expect(cause.contains("handshake") || cause.contains("certificate") || cause.contains("CERTIFICATE"))
            #expect(await rig.server.currentStats.connections == 0)
        }
    }

    @Test func insecureSkipVerifyAcceptsAnyCertificate() async throws {
        let ca = try PrivateCA.make()
        var options = TestUpstreamServer.Options()
        options.tls = (ca.certificate, ca.key)
        try await Rig.with(server: options, configure: { $0.tls.insecureSkipVerify = true }) { rig in
            rig.transport.start()
            await until("connected without verification", on: rig.recorder) { rig.recorder.events.contains(.connected) }
        }
    }
}
