import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
import TestUpstream
#endif

/// No file I/O on the loop that serves every client: a `connecting_payload_file` that takes
/// seconds to answer (a FIFO fed by a credentials helper, a stuck mount) stalls only the
/// connection that reads it.
@Suite(.serialized) struct BlockingFileTests {
    @Test func aStuckPayloadFileStallsOnlyTheConnectionThatReadsIt() async throws {
        let directory = try makeTemporaryDirectory("gqlmux-fifo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let feeder = try FIFOFeeder(path: directory + "/payload", payload: #"{"token":"fifo"}"#)
        defer { feeder.stop() }
        feeder.allow(1)  // the first connection's connect at start
        let pool = "connecting_payload_file = \"\(feeder.path)\"\nmax_operations_per_connection = 1\nmax_connections = 2\nlazy_close_timeout = 0"
        try await DaemonRig.with(upstreamConfig: pool) { rig in
            let c = try await rig.connect()
            c.subscribe(id: "a")  // connection 0
            await rig.upstreamActive(1)
            feeder.allow(1)
            c.subscribe(id: "b", "subscription B { tick }")  // opens connection 1, which reads the FIFO
            await rig.upstreamActive(2)
            c.send(#"{"type":"complete","id":"b"}"#)  // connection 1 is empty: it closes
            await until("the extra connection closed", upstream: rig.server) { $0.openConnections == 1 }
            c.subscribe(id: "b2", "subscription B2 { tick }")  // connection 1 connects again: nobody writes the FIFO
            // The FIFO is written only after this loop: a loop thread blocked by the read would
            // answer no tick and no status until then, so every answer below proves it is not.
            var answered = 0
            let stalled = ContinuousClock.now
            var ticks = 0
            while ContinuousClock.now - stalled < .seconds(3) || ticks < 5 {
                ticks += 1
                await rig.server.tick()
                await until("tick \(ticks) reached the client of connection 0 while the payload file was stuck", on: c) {
                    c.lines(containing: #""id":"a","payload""#).count == ticks
                }
                let id = "status-\(ticks)"
                let asked = ContinuousClock.now
                c.send(#"{"type":"status","id":"\#(id)"}"#)
                while c.lines(containing: #""id":"\#(id)""#).isEmpty {
                    guard ContinuousClock.now - asked < .seconds(10) else {
                        Issue.record("status \(id) not answered while the payload file was stuck")
                        return
                    }
                    try await Task.sleep(for: .milliseconds(1))
                }
                answered += 1
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(feeder.served == 2, "the read was still stuck all along")
            #expect(c.lines(containing: #""id":"b2","payload""#).isEmpty)
            #expect(answered == ticks && ticks >= 5, "\(ticks) ticks delivered, status answered \(answered) times while the payload file was stuck")
            feeder.allow(1)  // the helper answers at last: connection 1 comes up with b2
            await rig.upstreamActive(2)
            await rig.server.tick()
            await until("b2 streams", on: c) { !c.lines(containing: #""id":"b2","payload""#).isEmpty }
            #expect(await rig.server.currentStats.lastInitPayload == #"{"token":"fifo"}"#)
        }
    }
}

/// A credentials helper on a FIFO: each `allow` lets one reader through (open, write, close).
/// `@unchecked Sendable` — safe because its state is a semaphore and lock-protected boxes.
final class FIFOFeeder: @unchecked Sendable {
    let path: String
    private let payload: [UInt8]
    private let permits = DispatchSemaphore(value: 0)
    private let stopped = NIOLockedValueBox(false)
    private let servedBox = NIOLockedValueBox(0)
    private let done = DispatchSemaphore(value: 0)

    init(path: String, payload: String) throws {
        self.path = path
        self.payload = Array(payload.utf8)
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        Thread { self.run() }.start()
    }

    var served: Int { servedBox.withLockedValue { $0 } }

    func allow(_ count: Int) { for _ in 0..<count { permits.signal() } }

    private func run() {
        defer { done.signal() }
        while true {
            permits.wait()
            if stopped.withLockedValue({ $0 }) { return }
            let fd = open(path, O_WRONLY)  // blocks until gqlmuxd opens it for reading
            guard fd >= 0 else { return }
            _ = payload.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            if stopped.withLockedValue({ $0 }) { return }
            servedBox.withLockedValue { $0 += 1 }
        }
    }

    /// Ends the feeder thread, also when it is blocked opening the FIFO.
    func stop() {
        stopped.withLockedValue { $0 = true }
        permits.signal()
        let reader = open(path, O_RDONLY | O_NONBLOCK)  // lets a blocked open for writing return
        done.wait()
        if reader >= 0 { close(reader) }
    }
}
