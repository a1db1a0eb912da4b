import Foundation
import GQLMuxDaemon
import NIOCore
import TestUpstream
import Testing

/// End-to-end fuzzing over the real socket: thousands of mutated lines from many connections
/// while one subscriber watches. Passes only if the daemon stays up, the watcher sees nothing
/// but `next`, and the upstream saw exactly one connection.
@Suite(.serialized) struct SocketFuzzTests {
    /// Deterministic mutations (SplitMix64), so a failure can be replayed from its seed.
    struct Mutator {
        var random: SplitMix64
        init(state: UInt64) { random = SplitMix64(seed: state) }
        mutating func next() -> UInt64 { random.next() }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }

        mutating func mutate(_ line: [UInt8]) -> [UInt8] {
            var bytes = line
            for _ in 0...below(4) {
                guard !bytes.isEmpty else { break }
                let at = below(bytes.count)
                switch below(7) {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: next())  // any byte, invalid UTF-8 included
                case 1: bytes.remove(at: at)
                case 2: bytes.insert([0xFF, 0xC0, 0xED, 0x80, 0x22, 0x5C, 0x7B, 0x5B][below(8)], at: at)
                case 3: bytes.insert(contentsOf: Array(#"\ud800"#.utf8), at: at)
                case 4: bytes = Array(bytes.prefix(at))
                case 5: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 1 + below(16))], at: at)
                default: bytes[at] = bytes[at] ^ (1 << UInt8(below(8)))
                }
            }
            return bytes
        }
    }

    static let seeds: [String] = [
        #"{"type":"connection_init","payload":{"protocol":1,"client":"fuzz"}}"#,
        #"{"type":"subscribe","id":"1","payload":{"query":"subscription { tick }","variables":{"a":[1,2,{"b":"c"}]}}}"#,
        #"{"type":"subscribe","id":"2","payload":{"query":"query Q($x: Int) { hello(x: $x) }","operationName":"Q","variables":{"x":1}}}"#,
        #"{"type":"subscribe","id":"3","payload":{"query":"{ a { b { c } } } # comment","extensions":{"e":true}}}"#,
        #"{"type":"complete","id":"1"}"#,
        #"{"type":"ping","payload":{"k":"\u00e9\n"}}"#,
        #"{"type":"status","id":"s"}"#,
    ]

    @Test func thousandsOfMutatedLinesFromManyConnectionsDisturbNobody() async throws {
        try await DaemonRig.with() { rig in
            let watcher = try await rig.connect()
            watcher.subscribe(id: "w")
            await until("watcher active", on: watcher) { !watcher.lines(containing: #""state":"active""#).isEmpty }
            let settled = watcher.lines.count
            var mutator = Mutator(state: 0x6A71_6C6D_7578)
            var sent = 0
            for _ in 0..<200 {  // 200 connections × 60 lines = 12,000 mutated lines
                let client = try await rig.connect()
                var batch = ByteBuffer()
                for _ in 0..<60 {
                    let seed = Array(Self.seeds[mutator.below(Self.seeds.count)].utf8)
                    let line = mutator.mutate(seed)
                    // Admin verbs would legitimately pause or reconnect the upstream (tests run as root).
                    let text = String(decoding: line, as: UTF8.self)
                    if text.contains("pause") || text.contains("resume") || text.contains("reload") { continue }
                    batch.writeBytes(line)
                    batch.writeString("\n")
                    sent += 1
                }
                try? await client.channel.writeAndFlush(batch)
                client.crash()  // the daemon still reads what was written, then sees EOF
            }
            await until("every fuzzing connection served to its end", within: 30, on: rig.log) {
                rig.log.count(.clientDisconnected) == 200
            }
            for round in 1...3 {
                _ = await rig.server.tick()
                await until("watcher got tick \(round)", on: watcher) { watcher.lines(containing: #""type":"next""#).count == round }
            }
            #expect(sent > 10_000)
            let after = watcher.lines.dropFirst(settled)
            #expect(after.allSatisfy { $0.hasPrefix(#"{"type":"next","id":"w""#) }, "watcher saw: \(after.filter { !$0.contains("next") })")
            #expect(!watcher.isClosed)
            #expect(await rig.server.currentStats.connections == 1)
            let status = try await rig.connect()
            status.send(#"{"type":"status","id":"s"}"#)
            await until("daemon still answers", on: status) { !status.lines(containing: #""type":"status""#).isEmpty }
        }
    }
}
