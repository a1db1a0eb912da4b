import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A socket option of a channel, read at once on its loop. NIO asks the kernel (`getsockopt`)
/// and answers with a future, which on the channel's own loop it completes before returning:
/// read here, that is a synchronous call. Should a NIO release ever answer later, the read
/// stops the process at once (a `precondition`, caught by the first test that reads a peer's
/// credentials) rather than answering "not a socket" and so losing a peer's identity or a
/// restart's record without a word.
package enum SocketOptionNow {
    /// SO_COOKIE (Linux 4.12, asm-generic/socket.h), which Glibc's Swift overlay does not name: the socket's number,
    /// unique while the system runs, by which a restart knows a descriptor it was handed.
    package static let cookieOption: Int32 = 57

    /// Option `name` at `level` of `channel`'s socket as a `Value` (the kernel's struct, laid out
    /// alike); nil when the channel is not a socket or the kernel refuses.
    package static func read<Value: Sendable>(_ channel: any Channel, level: Int32, name: Int32, as type: Value.Type = Value.self) -> Value? {
        channel.eventLoop.preconditionInEventLoop()
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<Value> = provider.unsafeGetSocketOption(level: SocketOptionLevel(level), name: SocketOptionName(name))
        let box = Box<Value>()
        future.whenComplete { box.answer = $0 }
        guard let answer = box.answer else { preconditionFailure("getsockopt(\(level), \(name)) did not answer at once on its channel's loop") }
        return try? answer.get()
    }

    /// `channel`'s socket cookie; nil when it is not a socket.
    package static func cookie(of channel: any Channel) -> UInt64? {
        read(channel, level: SOL_SOCKET, name: cookieOption, as: UInt64.self)
    }

    /// The cookie of socket `fd`, read straight from the kernel; nil when it is not a socket.
    package static func cookie(ofDescriptor fd: CInt) -> UInt64? {
        var cookie: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        guard getsockopt(fd, SOL_SOCKET, cookieOption, &cookie, &length) == 0, length == MemoryLayout<UInt64>.size else { return nil }
        return cookie
    }

    /// `@unchecked Sendable` — safe because the future is completed by the time `read` looks
    /// (a synchronous getsockopt on the channel's loop, asserted above), so `whenComplete` runs
    /// on this thread before `read` returns, and the box never leaves it.
    private final class Box<Value>: @unchecked Sendable {
        var answer: Result<Value, any Error>?
    }
}
