import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The physical reference for fan-out, measured in the same run as gqlmuxd: `subscribers` Unix
/// socketpairs, one writer thread sending the same `lineBytes`-byte line to each in batches of
/// 64 lines per `write`, and one reader thread draining all of them with `poll`. No JSON, no
/// framing work: what the kernel and two threads can move. gqlmuxd's figures are printed as a
/// ratio to it, so machine load cancels out.
enum SocketpairReference {
    struct Result {
        var deliveries: Int
        var seconds: Double
        var deliveriesPerSecond: Double { Double(deliveries) / seconds }
    }

    static func run(subscribers: Int, lineBytes: Int, messages: Int) -> Result {
        var pairs: [(writer: Int32, reader: Int32)] = []
        for _ in 0..<subscribers {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { fatalError("socketpair: \(errno)") }
            pairs.append((fds[0], fds[1]))
            _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        }
        defer {
            for pair in pairs {
                close(pair.writer)
                close(pair.reader)
            }
        }
        let batchLines = 64
        var line = [UInt8](repeating: UInt8(ascii: "x"), count: max(lineBytes, 2))
        line[line.count - 1] = UInt8(ascii: "\n")
        let batch = [UInt8]((0..<batchLines).flatMap { _ in line })
        let expectedBytes = messages * line.count
        let writers = pairs.map(\.writer)
        let lineCount = line.count
        let start = ContinuousClock.now

        let writer = Thread {
            var sent = 0
            while sent < messages {
                let lines = min(batchLines, messages - sent)
                for fd in writers {
                    batch.withUnsafeBytes { raw in
                        var offset = 0
                        let total = lines * lineCount
                        while offset < total {
                            let n = write(fd, raw.baseAddress! + offset, total - offset)
                            if n > 0 { offset += n } else if errno != EINTR { return }
                        }
                    }
                }
                sent += lines
            }
        }
        writer.start()

        var received = [Int](repeating: 0, count: subscribers)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pollFDs = pairs.map { pollfd(fd: $0.reader, events: Int16(POLLIN), revents: 0) }
        var open = subscribers
        while open > 0 {
            _ = poll(&pollFDs, nfds_t(pollFDs.count), 1000)
            for i in pollFDs.indices where pollFDs[i].revents & Int16(POLLIN) != 0 && received[i] < expectedBytes {
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(pollFDs[i].fd, $0.baseAddress, $0.count) }
                    guard n > 0 else { break }
                    received[i] += n
                }
                if received[i] >= expectedBytes {
                    open -= 1
                    pollFDs[i].events = 0
                }
            }
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Result(deliveries: subscribers * messages, seconds: seconds)
    }
}
