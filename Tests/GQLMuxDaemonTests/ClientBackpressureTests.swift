import Foundation
import GQLMuxClient
import GQLMuxDaemon
import NIOCore
import TestUpstream
import Testing

/// The client library holds a bounded number of results per subscription and stops reading
/// the socket while one is full, so a slow app does not grow; the daemon's client_buffer_bytes
/// then decides, and a cut surfaces as a typed error.
@Suite(.serialized) struct ClientBackpressureTests {
    @Test func anAppThatDoesNotIterateStaysBoundedAndIsCutWithATypedError() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nclient_buffer_bytes = 262144") { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath, bufferedResults: 50))
            defer { Task { await client.close() } }
            let slow = client.subscribe(query: "subscription { tick }")
            await rig.upstreamActive(1)
            await eventually("active") { slow.state == .active }
            // 4,000 ticks of ~2 KB (8 MB): far more than the app buffer plus the daemon's 256 KiB.
            // Sampled while the connection is up: once the daemon has cut the client and closed
            // the socket, the client reads to EOF what the kernel still held (~200 KB), which a
            // loaded run sampled as 170; the bound is about reading paused on a live connection.
            var maxBuffered = 0
            for _ in 0..<40 {
                await rig.server.tick(count: 100, padding: 2_000)
                await eventually("the app's buffer filled") { slow.bufferedCount >= 50 || rig.log.count(.slowConsumer) > 0 }
                let sample = slow.bufferedCount
                if rig.log.count(.slowConsumer) > 0 { break }
                maxBuffered = max(maxBuffered, sample)
            }
            await until("the daemon cut the slow client", on: rig.log) { rig.log.count(.slowConsumer) == 1 }
            // Bounded: the 50 it asked for, plus at most two socket reads (2 x 64 KiB ~ 64 lines of 2 KB).
            #expect(maxBuffered <= 50 + 64)
            #expect(maxBuffered >= 50)
            var received = 0
            do {
                for try await _ in slow { received += 1 }
                Issue.record("iteration ended without an error after \(received) results")
            } catch let error as GQLMuxError {
                #expect(error.code == "SLOW_CONSUMER")
            }
            // Everything past the app's 50 was still in a buffer when the daemon cut it: its own
            // 256 KiB for this client plus the turn's run being written (at most 256 KiB more),
            // the kernel's send buffer (256 KiB set, 512 KiB as Linux doubles it) and two of the
            // client's 64 KiB reads, in lines of over 2,000 bytes; the rest of the 4,000 was
            // dropped.
            let inFlight = (262_144 + 262_144 + 524_288 + 2 * 65_536) / 2_000
            #expect(received >= 50 && received <= 50 + inFlight, "\(received) results after the cut")
        }
    }

    @Test func aSlowButSteadyAppGetsEveryResultWithABoundedBuffer() async throws {
        try await DaemonRig.with() { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath, bufferedResults: 20))
            defer { Task { await client.close() } }
            let sub = client.subscribe(query: "subscription { tick }")
            await rig.upstreamActive(1)
            await eventually("active") { sub.state == .active }
            // Lines of about 4 KiB: a 64 KiB socket read holds at most 17, so a client that
            // reads past its buffer shows well below the 500 sent.
            await rig.server.tick(count: 500, padding: 4_000)
            var received = 0
            var maxBuffered = 0
            for try await _ in sub {
                received += 1
                maxBuffered = max(maxBuffered, sub.bufferedCount)
                if received % 50 == 0 { try await Task.sleep(for: .milliseconds(20)) }
                if received == 500 { break }
            }
            #expect(received == 500)
            // The buffer, plus at most two socket reads (2 × 64 KiB) of 4 KiB lines.
            #expect(maxBuffered <= 20 + 2 * (65_536 / 4_000 + 1), "\(maxBuffered) results buffered")
            #expect(rig.log.count(.slowConsumer) == 0)
        }
    }
}
