import Foundation
import GQLMuxDaemon
import NIOPosix
import TestUpstream
import Testing

/// Issue 8: strawberry with its default cap (100 active operations per connection). 250
/// distinct subscriptions stream over 3 connections, dedup holds across them, and after a
/// SIGKILL and restart of the server all 250 resume. The timings are printed for the record.
@Suite(.serialized, .timeLimit(.minutes(5))) struct StrawberryPoolTests {
    @Test func twoHundredFiftySubscriptionsOverThreeConnectionsSurviveASIGKILL() async throws {
        try await StrawberryRig.with(upstream: { _ in "connecting_payload = { token = \"secret\" }\nmax_operations_per_connection = 100" }) {
            strawberry,
            rig in
            await until("connected", within: 15, on: rig.log) { rig.log.count(.connected) == 1 }
            let client = try await LineClient.connect(rig.socket, group: rig.group)
            let ids = (0..<250).map { "S\($0)" }
            let started = ContinuousClock.now
            for id in ids { client.subscribe(id: id, "subscription \(id) { tick(intervalMs: 500) }") }
            await eventually("all 250 stream", within: 60) { Self.nexts(client).count == 250 }
            let streaming = ContinuousClock.now - started

            let status = await rig.status(client)
            #expect(status.contains(#""subscriptions":{"local":250,"upstream":250}"#), "\(status)")
            for (index, operations) in [(0, 100), (1, 100), (2, 50)] {
                #expect(status.contains(#"{"id":\#(index),"state":"connected","operations":\#(operations),"#), "\(status)")
            }
            #expect(client.lines(containing: "Subscription limit reached").isEmpty)

            // Dedup across connections: a second app's copy of S249 (on the third connection) joins it.
            let other = try await LineClient.connect(rig.socket, group: rig.group)
            other.subscribe(id: "copy", "subscription S249 { tick(intervalMs: 500) }")
            await until("the copy streams", on: other) { !other.lines(containing: #""id":"copy","payload""#).isEmpty }
            #expect(await rig.status(other).contains(#""subscriptions":{"local":251,"upstream":250}"#))

            // SIGKILL the server, restart it on its port: every subscription resumes.
            strawberry.kill()
            await until("reconnecting told for all 250", within: 20, on: client) {
                client.lines(containing: #""state":"reconnecting""#).count >= 250
            }
            let before = Self.nexts(client)
            let restarted = ContinuousClock.now
            try await strawberry.start()
            await eventually("all 250 resumed", within: 60) {
                let now = Self.nexts(client)
                return ids.allSatisfy { (now[$0] ?? 0) > (before[$0] ?? 0) }
            }
            let resumed = ContinuousClock.now - restarted
            #expect(client.lines(containing: "Subscription limit reached").isEmpty)
            #expect(Set(rig.log.all(.reconnected).compactMap { $0["GQLMUX_CONNECTION"] }) == ["0", "1", "2"])
            print(
                "strawberry pool: 250 distinct subscriptions streaming over 3 connections after \(streaming); all 250 resumed \(resumed) after the restarted server was started"
            )
        }
    }

    /// `next` lines per local id.
    static func nexts(_ client: LineClient) -> [String: Int] {
        var counts: [String: Int] = [:]
        let prefix = #"{"type":"next","id":""#
        for line in client.lines where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            counts[String(rest.prefix { $0 != "\"" }), default: 0] += 1
        }
        return counts
    }
}
