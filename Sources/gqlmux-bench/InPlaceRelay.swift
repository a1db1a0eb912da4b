import Foundation
import Spawn
import TestUpstream

#if canImport(Glibc)
import Glibc
#endif

/// The latency rows' floor: a bare relay in gqlmuxd's very place, a process between the test
/// upstream and a WebSocket client of the bench's own loop (the direct client's twin). It
/// accepts one TCP connection, connects to the upstream, and hands every byte on, both ways,
/// with `poll`, `read` and `write`: no parsing. The same sender writes to it as to gqlmuxd, over
/// TCP, and the same loop reads what it hands on, so what it adds over the direct client is
/// one more process woken and the bytes handed on, with the scheduler treating it as it treats
/// gqlmuxd.
enum InPlaceRelay {
    /// The relay process's body: listens on 127.0.0.1:`port` (held for it by the parent's
    /// reservation, bound again with `SO_REUSEADDR`), creates `ready` once it listens, relays one
    /// connection to 127.0.0.1:`upstreamPort`, and exits when either side closes.
    static func run(port: Int, upstreamPort: Int, ready: String) -> Never {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 1) == 0 else { exit(70) }
        guard FileManager.default.createFile(atPath: ready, contents: nil) else { exit(73) }
        let client = accept(listener, nil, nil)
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var upstream = loopback(upstreamPort)
        let connected = withUnsafePointer(to: &upstream) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard client >= 0, server >= 0, connected == 0 else { exit(71) }
        for fd in [client, server] { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var watched = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&watched, 2, -1) > 0 else { continue }
            for (index, from) in [client, server].enumerated() where watched[index].revents != 0 {
                let to = from == client ? server : client
                let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                guard count > 0 else { exit(0) }
                var sent = 0
                while sent < count {
                    let n = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    guard n > 0 else { exit(0) }
                    sent += n
                }
            }
        }
    }

    /// Starts the relay process (this benchmark's own binary) in front of the upstream at
    /// `upstreamPort`; returns it and the port it listens on, once it listens.
    static func start(upstreamPort: Int) throws -> (child: ChildProcess, port: Int, reservation: PortReservation) {
        let reservation = try PortReservation()
        let benchPath = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let ready = FileManager.default.temporaryDirectory.appendingPathComponent("gqlmux-relay-\(getpid())-\(reservation.port)").path
        try? FileManager.default.removeItem(atPath: ready)
        let child = try ChildProcess(
            benchPath,
            ["-", "tcp-relay", "\(reservation.port)", "\(upstreamPort)", ready],
            stdout: .discard,
            stderr: .inherit
        )
        for _ in 0..<1_000 where !FileManager.default.fileExists(atPath: ready) { usleep(5_000) }
        guard FileManager.default.fileExists(atPath: ready) else { throw BenchError("latency: the relay did not listen within 5 s") }
        try? FileManager.default.removeItem(atPath: ready)
        return (child, reservation.port, reservation)
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
