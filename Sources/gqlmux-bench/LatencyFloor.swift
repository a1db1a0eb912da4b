import Foundation
import Spawn

#if canImport(Glibc)
import Glibc
#endif

/// The machine's own floor, printed beside the latency rows and not judged: a bare relay (this
/// benchmark run as `relay`: `poll`, `read`, `write`, no parsing) between a sender and a receiver
/// thread on Unix sockets, every other message going to that receiver directly instead. Each
/// path is timed from its own write, and the relay's added time is the difference of the two
/// paths' percentiles: one more process woken and the bytes handed on, between plain threads
/// the scheduler keeps together. The judged floor is ``InPlaceRelay``, in gqlmuxd's very place.
enum LatencyFloor {
    /// The relay process's body: hands every byte from the socket at `from` to the socket at
    /// `to` until the first closes.
    static func relay(from: String, to: String) -> Never {
        let input = connectUnix(from)
        let output = connectUnix(to)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var watched = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
        while true {
            _ = poll(&watched, 1, -1)
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            guard count > 0 else { exit(0) }
            _ = buffer.withUnsafeBytes { write(output, $0.baseAddress, count) }
        }
    }

    /// Sends `samples` 8-byte tick numbers on each path, `interval` apart, the paths taking turns:
    /// one to the relay, the next to the receiver directly. Returns each path's times, write to
    /// receive, in µs.
    static func run(samples: Int = 2_000, interval: Duration = .microseconds(250)) throws -> (viaRelay: [Double], direct: [Double]) {
        let benchPath = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gqlmux-floor-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let inPath = directory + "/in.sock"
        let outPath = directory + "/out.sock"
        let inListener = listenUnix(inPath)
        let outListener = listenUnix(outPath)
        defer {
            close(inListener)
            close(outListener)
        }
        let child = try ChildProcess(benchPath, ["-", "relay", inPath, outPath], stdout: .discard, stderr: .inherit)
        let toRelay = accept(inListener, nil, nil)
        let fromRelay = accept(outListener, nil, nil)
        var direct: [Int32] = [0, 0]
        guard toRelay >= 0, fromRelay >= 0, socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &direct) == 0 else {
            fatalError("latency floor: sockets: \(errno)")
        }
        defer {
            close(toRelay)
            close(fromRelay)
            close(direct[0])
            close(direct[1])
            _ = child.waitBlocking()
        }
        // The receiver: one thread, both paths, a time per tick on the path it took.
        let receiver = FloorReceiver(samples: 2 * samples, relay: fromRelay, direct: direct[1])
        let thread = Thread { receiver.receive() }
        thread.start()
        // The receiver's slots: tick t of the 2 × samples, the even ones through the relay.
        var writes = [UInt64](repeating: 0, count: 2 * samples)
        for tick in 0..<(2 * samples) {
            var number = UInt64(tick)
            writes[tick] = DispatchTime.now().uptimeNanoseconds
            _ = withUnsafeBytes(of: &number) { write(tick % 2 == 0 ? toRelay : direct[0], $0.baseAddress, 8) }
            Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18 + Double(interval.components.seconds))
        }
        receiver.finished.lock(whenCondition: 1)
        receiver.finished.unlock()
        shutdown(toRelay, Int32(SHUT_WR))
        func times(_ received: [UInt64?], parity: Int) -> [Double] {
            stride(from: parity, to: 2 * samples, by: 2).compactMap { tick in received[tick].map { (Double($0) - Double(writes[tick])) / 1e3 } }
        }
        return (times(receiver.viaRelay, parity: 0), times(receiver.direct, parity: 1))
    }

    private static func listenUnix(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 1) == 0 else { fatalError("latency floor: listen \(path): \(errno)") }
        return fd
    }

    private static func connectUnix(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, connected == 0 else { exit(70) }
        return fd
    }

    private static func unixAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes + [0])
        }
        return address
    }
}

/// The floor's receiver thread: waits in `poll` on both sockets and notes when each tick came.
///
/// `@unchecked Sendable` — safe because `viaRelay` and `direct` are written only by the receiver
/// thread, inside ``receive()``, and read by the sender only after `finished` reaches condition 1,
/// which ``receive()`` sets as its last act (the lock orders the writes before the reads).
private final class FloorReceiver: @unchecked Sendable {
    var viaRelay: [UInt64?]
    var direct: [UInt64?]
    let finished = NSConditionLock(condition: 0)
    private let relayFD: Int32
    private let directFD: Int32

    init(samples: Int, relay: Int32, direct: Int32) {
        viaRelay = Array(repeating: nil, count: samples)
        self.direct = Array(repeating: nil, count: samples)
        relayFD = relay
        directFD = direct
    }

    func receive() {
        var fds = [pollfd(fd: directFD, events: Int16(POLLIN), revents: 0), pollfd(fd: relayFD, events: Int16(POLLIN), revents: 0)]
        var pending: [[UInt8]] = [[], []]
        var buffer = [UInt8](repeating: 0, count: 4_096)
        var last = 0
        while last < viaRelay.count {  // each tick comes on one path
            guard poll(&fds, 2, 10_000) > 0 else { break }
            for index in 0..<2 where fds[index].revents & Int16(POLLIN) != 0 {
                let count = buffer.withUnsafeMutableBytes { read(fds[index].fd, $0.baseAddress, $0.count) }
                guard count > 0 else { continue }
                let now = DispatchTime.now().uptimeNanoseconds
                pending[index] += buffer[0..<count]
                while pending[index].count >= 8 {
                    let tick = Int(pending[index][0..<8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
                    pending[index].removeFirst(8)
                    if tick < viaRelay.count {
                        if index == 0 { direct[tick] = now } else { viaRelay[tick] = now }
                        last += 1
                    }
                }
            }
        }
        finished.lock()
        finished.unlock(withCondition: 1)
    }
}
