import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Reads `connecting_payload_file` for each connect on a thread pool, never on the event loop
/// that serves every client: the file may be on a slow mount, or a FIFO fed by a credentials
/// helper that takes seconds to answer.
///
/// One read per path at a time: connects that start while a read is in flight (another pool
/// connection, a retry after a connect timeout) share its result, so a FIFO that nobody writes
/// holds one pool thread, not one per attempt. Shared by the connections of one pool; its
/// state is confined to ``eventLoop`` in a `NIOLoopBoundBox`, which traps if touched off it.
package final class ConnectingPayloadSource: Sendable {
    package let eventLoop: any EventLoop
    private let threadPool: NIOThreadPool
    private let inFlight: NIOLoopBoundBox<[String: EventLoopFuture<ByteBuffer?>]>
    private let secretsInFlight: NIOLoopBoundBox<[String: EventLoopFuture<AppSyncSettings.Secret>]>

    package init(eventLoop: any EventLoop, threadPool: NIOThreadPool = .singleton) {
        self.eventLoop = eventLoop
        self.threadPool = threadPool
        self.inFlight = .makeBoxSendingValue([:], eventLoop: eventLoop)
        self.secretsInFlight = .makeBoxSendingValue([:], eventLoop: eventLoop)
    }

    /// AppSync's credentials for one connect or request, a file read anew on the thread pool
    /// (reads already in flight for the same file are shared); a file's result arrives on a
    /// later turn.
    package func readAppSync(_ auth: AppSyncSettings.Auth) -> EventLoopFuture<AppSyncSettings.Secret> {
        let path: String
        switch auth {
        case .apiKey(.file(let file)), .token(.file(let file)), .iam(.file(let file, _)): path = file
        case .iam(.environment(let credentials)): return eventLoop.makeSucceededFuture(.aws(credentials))
        case .apiKey, .token:
            return eventLoop.makeCompletedFuture { try ConnectingPayloadReader.readAppSync(auth) }
        }
        return shared(path, in: secretsInFlight) { try ConnectingPayloadReader.readAppSync(auth) }
    }

    /// The payload for one connect; a file's result always arrives on a later loop turn.
    package func read(_ payload: UpstreamConfiguration.ConnectingPayload) -> EventLoopFuture<ByteBuffer?> {
        guard case .file(let path) = payload else {
            return eventLoop.makeSucceededFuture(try? ConnectingPayloadReader.read(payload))
        }
        return shared(path, in: inFlight) { try ConnectingPayloadReader.read(payload) }
    }

    /// `read` on the thread pool, or the read of `path` already in flight.
    private func shared<T: Sendable>(
        _ path: String,
        in flights: NIOLoopBoundBox<[String: EventLoopFuture<T>]>,
        _ read: @escaping @Sendable () throws -> T
    ) -> EventLoopFuture<T> {
        if let shared = flights.value[path] { return shared }
        let future = threadPool.runIfActive(eventLoop: eventLoop, read)
        flights.value[path] = future
        future.whenComplete { _ in flights.value[path] = nil }
        return future
    }
}

/// Seconds since 1970-01-01 UTC by the system's clock: the time an AWS signature names.
func wallClockSeconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec)
}
