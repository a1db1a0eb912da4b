import Foundation
import GQLMuxDaemon
import NIOPosix
import TestUpstream
import Testing

@Suite(.serialized, .timeLimit(.minutes(5))) struct StrawberryDaemonTests {
    @Test func fiveClientsShareOneStrawberrySubscriptionThroughTheDaemon() async throws {
        try await StrawberryRig.with(upstream: { _ in #"connecting_payload = { token = "secret" }"# }) { strawberry, rig in
            await until("connected to strawberry", within: 15, on: rig.log) { rig.log.count(.connected) == 1 }

            var clients: [LineClient] = []
            for i in 0..<5 {
                let client = try await LineClient.connect(rig.socket, group: rig.group)
                client.subscribe(id: "t\(i)", "subscription { tick(intervalMs: 50) }")
                clients.append(client)
            }
            await eventually("every client receives ticks") { clients.allSatisfy { $0.lines(containing: #""type":"next""#).count >= 3 } }
            let probe = try await LineClient.connect(rig.socket, group: rig.group)
            probe.subscribe(id: "q", "{ hello }")
            probe.subscribe(id: "m", "mutation { increment }")
            await until("query and mutation answered", on: probe) {
                probe.lines.contains(#"{"type":"next","id":"q","payload":{"data":{"hello":"world"}}}"#)
                    && !probe.lines(containing: #""id":"m","payload":{"data":{"increment":"#).isEmpty
                    && probe.lines(containing: #""type":"complete""#).count == 2
            }
            probe.send(#"{"type":"status","id":"st"}"#)
            await until("status answered", on: probe) { !probe.lines(containing: #""type":"status""#).isEmpty }
            let status = probe.lines(containing: #""type":"status""#).first ?? ""
            #expect(status.contains(#""subscriptions":{"local":5,"upstream":1}"#), "\(status)")

            // Restart strawberry in the middle: every client sees reconnecting, then ticks again.
            strawberry.kill()
            await eventually("reconnecting told to every client") {
                clients.allSatisfy { !$0.lines(containing: #""state":"reconnecting""#).isEmpty }
            }
            let counts = clients.map { $0.lines(containing: #""type":"next""#).count }
            try await strawberry.start()
            await eventually("ticks again after the restart", within: 20) {
                zip(clients, counts).allSatisfy { client, before in client.lines(containing: #""type":"next""#).count >= before + 2 }
            }
        }
    }
}
