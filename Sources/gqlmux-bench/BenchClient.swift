import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A local-protocol client for benchmarks: counts received lines without parsing them,
/// and optionally records the receive time of each `tick` number.
/// `@unchecked Sendable` — safe because NIO calls it on its channel's loop and what the
/// benchmark reads from another thread is in lock-protected boxes.
final class BenchClient: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let lines = ManagedAtomicCounter()
    private let recordTicks: Bool
    private let ticks = NIOLockedValueBox<[Int: ContinuousClock.Instant]>([:])
    private var partial: [UInt8] = []
    var channel: (any Channel)!

    init(recordTicks: Bool = false) { self.recordTicks = recordTicks }

    /// Connects, retrying while the daemon's accept backlog is full (EAGAIN).
    static func connect(_ path: String, group: any EventLoopGroup, recordTicks: Bool = false, autoRead: Bool = true) async throws -> BenchClient {
        for attempt in 0..<200 {
            do {
                return try await connectOnce(path, group: group, recordTicks: recordTicks, autoRead: autoRead)
            } catch let error as IOError where error.errnoCode == EAGAIN && attempt < 199 {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        throw IOError(errnoCode: EAGAIN, reason: "connect")
    }

    private static func connectOnce(_ path: String, group: any EventLoopGroup, recordTicks: Bool, autoRead: Bool) async throws -> BenchClient {
        let client = BenchClient(recordTicks: recordTicks)
        client.channel = try await ClientBootstrap(group: group)
            .channelOption(.autoRead, value: autoRead)
            .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 1 << 20))
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(client) } }
            .connect(unixDomainSocketPath: path).get()
        return client
    }

    func send(_ text: String) { channel.writeAndFlush(ByteBuffer(string: text), promise: nil) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let now = ContinuousClock.now
        var count = 0
        buffer.withUnsafeReadableBytes { bytes in
            var lineCounter = LineCounter()
            count = lineCounter.feed(bytes).results
            if recordTicks {
                for byte in bytes {
                    if byte == UInt8(ascii: "\n") {
                        if let n = Self.tickNumber(partial) { ticks.withLockedValue { $0[n] = now } }
                        partial.removeAll(keepingCapacity: true)
                    } else {
                        partial.append(byte)
                    }
                }
            }
        }
        lines.add(count)
    }

    func receiveTime(of tick: Int) -> ContinuousClock.Instant? { ticks.withLockedValue { $0[tick] } }

    static func tickNumber(_ line: [UInt8]) -> Int? {
        let key = Array(#""tick":"#.utf8)
        guard let start = line.firstRange(of: key)?.upperBound else { return nil }
        var n = 0
        var i = start
        while i < line.count, line[i] >= 48, line[i] <= 57 {
            n = n * 10 + Int(line[i] - 48)
            i += 1
        }
        return i > start ? n : nil
    }
}

/// A counter shared between an event loop thread and the benchmark.
final class ManagedAtomicCounter: Sendable {
    private let box = NIOLockedValueBox(0)
    func add(_ n: Int) { box.withLockedValue { $0 += n } }
    var value: Int { box.withLockedValue { $0 } }
}
