import Foundation
import GQLMuxDaemon
import NIOCore
import TestUpstream
import Testing

/// Nothing that happens during a delivery enters the multiplexer core mid-iteration: a client
/// cut by its own write in the middle of a fan-out is taken out after the fan-out.
@Suite(.serialized) struct ReentrancyTests {
    @Test func aClientCutForSlownessMidFanOutChangesNothingForTheOthers() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nclient_buffer_bytes = 65536") { rig in
            let probe = try await rig.connect()
            var asked = 0
            func local() async -> Int? {
                asked += 1
                let id = "st\(asked)"
                probe.send(#"{"type":"status","id":"\#(id)"}"#)
                await until("status \(id)", on: probe) { !probe.lines(containing: #""id":"\#(id)""#).isEmpty }
                guard let line = probe.lines(containing: #""id":"\#(id)""#).first,
                    let range = line.range(of: #""local":"#)
                else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }
            // 500 subscribers of one upstream subscription, in this join order: 160 on two
            // readers, 100 on a client that never reads (positions 160-259), 240 on three readers.
            var readers: [LineClient] = []
            var next = 0
            func join(_ client: LineClient, _ count: Int) async {
                for _ in 0..<count {
                    client.subscribe(id: "s\(next)")
                    next += 1
                }
                let expected = next
                await eventually("\(expected) local subscriptions") { await local() == expected }
            }
            for _ in 0..<2 {
                let reader = try await rig.connect()
                readers.append(reader)
                await join(reader, 80)
            }
            let slow = try await rig.connect(autoRead: false)
            await join(slow, 100)
            for _ in 0..<3 {
                let reader = try await rig.connect()
                readers.append(reader)
                await join(reader, 80)
            }
            await rig.upstreamActive(1)
            // ~430 B lines: each message is 43 KB for the client that never reads, so its batch is
            // written in the middle of the fan-out (a 32 KiB chunk), and after a few messages more than
            // its socket buffer and 64 KiB of client_buffer_bytes are pending: it is cut by that write. A
            // reader's 34 KB per message fits its socket while it reads.
            var ticks = 0
            while rig.log.count(.slowConsumer) == 0 && ticks < 40 {
                ticks += 1
                await rig.server.tick(count: 1, padding: 330)
                let expected = ticks * 80
                for (index, reader) in readers.enumerated() {
                    await until("reader \(index) got tick \(ticks)", on: reader) { reader.lines(containing: #""type":"next""#).count == expected }
                }
            }
            #expect(rig.log.count(.slowConsumer) == 1, "the client that never reads was cut")
            #expect(ticks > 1 && ticks < 40)
            // The core is consistent: the cut client's 100 subscriptions are gone, nothing else.
            await eventually("400 local subscriptions") { await local() == 400 }
            #expect(rig.daemon.eventLoop.inEventLoop == false)
            let status = try #require(probe.lines(containing: #""type":"status""#).last)
            #expect(status.contains(#""subscriptions":{"local":400,"upstream":1}"#), "\(status)")
            // Every reader got every tick, in order, on every subscription; and the next one too.
            await rig.server.tick(count: 1, padding: 330)
            ticks += 1
            for (index, reader) in readers.enumerated() {
                await until("reader \(index) got the tick after the cut", on: reader) { reader.lines(containing: #""type":"next""#).count == ticks * 80 }
                for id in 0..<80 {
                    let subscription = index < 2 ? index * 80 + id : 260 + (index - 2) * 80 + id
                    let values = reader.lines(containing: #""id":"s\#(subscription)","payload""#).count
                    #expect(values == ticks, "reader \(index) s\(subscription): \(values) of \(ticks)")
                }
                #expect(reader.lines(containing: #""type":"error""#).isEmpty)
            }
        }
    }
}
