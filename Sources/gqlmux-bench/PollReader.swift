import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The fan-out rows' clients read the way the reference's reader does: plain non-blocking
/// sockets, one thread, one `poll` loop, one 64 KiB buffer. So both sides of "gqlmuxd ÷
/// reference" have the same reader and the ratio compares the writers alone.
///
/// Why it matters: a socket watched by epoll (a NIO channel) runs epoll's callback on every
/// write to it, and wakes the reader whenever it sleeps; the writer pays for both. `poll`
/// watches a socket only while the reader waits in it. With NIO clients, gqlmuxd paid that on
/// each of its writes while the reference's writer did not.
final class PollReader: Sendable {
    private let fds: [Int32]
    private let published: NIOLockedValueBox<(results: [Int], closed: [Bool])>
    private let stopping = NIOLockedValueBox(false)
    private let finished = ConditionLock(value: false)

    /// Reads `connections` (connected, request sent; `pending` is what arrived with the
    /// response head) until `close()`.
    init(_ connections: [RawConnection]) {
        fds = connections.map(\.fd)
        published = NIOLockedValueBox(([Int](repeating: 0, count: connections.count), [Bool](repeating: false, count: connections.count)))
        for connection in connections { _ = fcntl(connection.fd, F_SETFL, fcntl(connection.fd, F_GETFL) | O_NONBLOCK) }
        let thread = Thread { [self] in readLoop(connections) }
        thread.start()
    }

    /// Results each connection has received so far.
    var results: [Int] { published.withLockedValue { $0.results } }
    /// Whether gqlmuxd closed any connection (end of stream or a WebSocket close frame).
    var anyClosed: Bool { published.withLockedValue { $0.closed.contains(true) } }

    /// Ends the reading thread and closes every socket; once.
    func close() {
        let wasStopping = stopping.withLockedValue { stopping in
            defer { stopping = true }
            return stopping
        }
        guard !wasStopping else { return }
        finished.lock(whenValue: true)
        finished.unlock()
        for fd in fds { Glibc.close(fd) }
    }

    private func readLoop(_ connections: [RawConnection]) {
        var counters = connections.map(\.counter)
        var results = [Int](repeating: 0, count: connections.count)
        var closed = [Bool](repeating: false, count: connections.count)
        for i in connections.indices {
            let (found, closes) = connections[i].pending.withUnsafeBytes { counters[i].feed($0) }
            results[i] += found
            closed[i] = closed[i] || closes > 0
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pollFDs = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while !stopping.withLockedValue({ $0 }) {
            published.withLockedValue { $0 = (results, closed) }
            guard poll(&pollFDs, nfds_t(pollFDs.count), 50) > 0 else { continue }
            for i in pollFDs.indices where pollFDs[i].revents != 0 {
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(pollFDs[i].fd, $0.baseAddress, $0.count) }
                    guard n > 0 else {
                        if n == 0 || (errno != EAGAIN && errno != EINTR) {
                            pollFDs[i].events = 0  // closed by gqlmuxd
                            closed[i] = true
                        }
                        break
                    }
                    let (found, closes) = buffer.withUnsafeBytes { counters[i].feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    results[i] += found
                    if closes > 0 { closed[i] = true }
                    if n < buffer.count { break }
                }
            }
        }
        finished.lock()
        finished.unlock(withValue: true)
    }
}

/// One benchmark client's socket before its reader takes it: connected, its request sent, and
/// what it counts.
struct RawConnection {
    var fd: Int32
    var counter: any StreamCounter
    /// Bytes that arrived with the HTTP response head, not yet counted.
    var pending: [UInt8] = []

    /// A line-protocol client of `path` that has sent `line` (a subscribe).
    static func line(_ path: String, sending line: String) throws -> RawConnection {
        let fd = try connect(path)
        try writeAll(fd, Array((line + "\n").utf8))
        return RawConnection(fd: fd, counter: LineCounter())
    }

    /// An HTTP client of `path` that has sent `request` and read the response head, which must
    /// have status `status`.
    static func http(_ path: String, sending request: String, status: Int, counter: any StreamCounter) throws -> RawConnection {
        let fd = try connect(path)
        try writeAll(fd, Array(request.utf8))
        var head: [UInt8] = []
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var chunk = [UInt8](repeating: 0, count: 4096)
        let end = Array("\r\n\r\n".utf8)
        while head.firstRange(of: end) == nil {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                Glibc.close(fd)
                throw BenchError("no HTTP response head from \(path)")
            }
            head += chunk[0..<n]
        }
        let split = head.firstRange(of: end)!.upperBound
        let statusLine = String(decoding: head.prefix { $0 != 0x0D }, as: UTF8.self)
        guard statusLine.split(separator: " ").dropFirst().first == Substring(String(status)) else {
            Glibc.close(fd)
            throw BenchError("expected \(status), got \(statusLine)")
        }
        return RawConnection(fd: fd, counter: counter, pending: Array(head[split...]))
    }

    /// A client's WebSocket text frame: masked, as RFC 6455 requires of clients.
    static func maskedTextFrame(_ text: String) -> [UInt8] {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
            } else if errno != EINTR {
                throw BenchError("write: errno \(errno)")
            }
        }
    }

    /// A blocking connect, retried while the daemon's accept backlog is full (EAGAIN).
    private static func connect(_ path: String) throws -> Int32 {
        for _ in 0..<200 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw BenchError("socket path too long: \(path)") }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if result == 0 { return fd }
            let error = errno
            Glibc.close(fd)
            guard error == EAGAIN else { throw BenchError("connect \(path): errno \(error)") }
            usleep(10_000)
        }
        throw BenchError("connect \(path): accept backlog full")
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
