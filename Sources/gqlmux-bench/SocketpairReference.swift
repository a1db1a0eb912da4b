import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The physical limits for fan-out, measured in the same run as gqlmuxd: `subscribers` Unix
/// socketpairs, one writer thread sending `lineBytes`-byte lines to each in batches of 64 lines
/// per `write`, and one reader thread draining all of them as gqlmuxd's line clients are read
/// (``PollReader``'s loop, each read's lines counted by the same counter). No JSON, no framing
/// work: what the kernel and two threads can move. gqlmuxd's figures are printed as a ratio to
/// each writer, so machine load cancels out.
enum SocketpairReference {
    /// How the writer hands a batch to its sockets.
    enum Writer: CaseIterable {
        /// Each subscriber's batch is copied into its own buffer, and its id written into
        /// every line, before its write; the kernel's default send buffer. What a fan-out that
        /// frames each subscriber's results apart can do at best.
        case copying
        /// One framed batch written to every socket as it is, each socket with the send buffer
        /// gqlmuxd gives its Unix-socket clients. What a fan-out that frames a run once can do
        /// at best: the fair limit for gqlmuxd.
        case sharedFrames

        var name: String {
            switch self {
            case .copying: "copying"
            case .sharedFrames: "shared frames"
            }
        }
    }

    /// gqlmuxd's SO_SNDBUF for a Unix-socket client (`ClientSocketOptions.unixSendBufferBytes`).
    static let clientSendBufferBytes: Int32 = 256 * 1_024

    struct Result {
        var deliveries: Int
        var seconds: Double
        var deliveriesPerSecond: Double { Double(deliveries) / seconds }
    }

    /// The best of `runs` runs: the first run of a size pays for socket buffers and page faults.
    static func best(_ writer: Writer, subscribers: Int, lineBytes: Int, messages: Int, runs: Int = 3) -> Double {
        (0..<runs).map { _ in run(writer, subscribers: subscribers, lineBytes: lineBytes, messages: messages).deliveriesPerSecond }.max()!
    }

    static func run(_ writer: Writer, subscribers: Int, lineBytes: Int, messages: Int) -> Result {
        var pairs: [(writer: Int32, reader: Int32)] = []
        for _ in 0..<subscribers {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { fatalError("socketpair: \(errno)") }
            pairs.append((fds[0], fds[1]))
            _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
            if writer == .sharedFrames {
                var size = clientSendBufferBytes
                _ = setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
        }
        defer {
            for pair in pairs {
                close(pair.writer)
                close(pair.reader)
            }
        }
        let batchLines = 64
        var line = [UInt8](repeating: UInt8(ascii: "x"), count: max(lineBytes, 4))
        line[line.count - 1] = UInt8(ascii: "\n")
        let batch = [UInt8]((0..<batchLines).flatMap { _ in line })
        let writers = pairs.map(\.writer)
        let lineCount = line.count
        let copying = writer == .copying
        let start = ContinuousClock.now

        let thread = Thread {
            var own = batch
            var sent = 0
            while sent < messages {
                let lines = min(batchLines, messages - sent)
                let total = lines * lineCount
                for (index, fd) in writers.enumerated() {
                    if copying {
                        // The subscriber's own copy, its id (two bytes) in every line.
                        own.withUnsafeMutableBytes { target in
                            batch.withUnsafeBytes { target.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: total) }
                            for l in 0..<lines {
                                target[l * lineCount] = UInt8(truncatingIfNeeded: index)
                                target[l * lineCount + 1] = UInt8(truncatingIfNeeded: index >> 8)
                            }
                        }
                    }
                    (copying ? own : batch).withUnsafeBytes { raw in
                        var offset = 0
                        while offset < total {
                            let n = write(fd, raw.baseAddress! + offset, total - offset)
                            if n > 0 { offset += n } else if errno != EINTR { return }
                        }
                    }
                }
                sent += lines
            }
        }
        thread.start()

        // The reader is PollReader's loop: one 64 KiB buffer, a read until a short one, and each
        // read's lines counted by the same counter gqlmuxd's line clients are counted with (so
        // both sides of a ratio read the same way, and only the writers differ).
        var received = [Int](repeating: 0, count: subscribers)
        var counters: [any StreamCounter] = (0..<subscribers).map { _ in LineCounter() }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pollFDs = pairs.map { pollfd(fd: $0.reader, events: Int16(POLLIN), revents: 0) }
        var open = subscribers
        while open > 0 {
            _ = poll(&pollFDs, nfds_t(pollFDs.count), 1000)
            for i in pollFDs.indices where pollFDs[i].revents & Int16(POLLIN) != 0 && received[i] < messages {
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(pollFDs[i].fd, $0.baseAddress, $0.count) }
                    guard n > 0 else { break }
                    received[i] += buffer.withUnsafeBytes { counters[i].feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])).results }
                    if n < buffer.count { break }
                }
                if received[i] >= messages {
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
