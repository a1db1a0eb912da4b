import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The peer of a Unix socket as the kernel reports it (SO_PEERCRED).
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32

    /// Mirrors `struct ucred`, which Glibc does not export to Swift.
    private struct UCred {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Reads the credentials of `channel`'s peer; nil when the channel is not a Unix socket.
    /// Must be called on the channel's loop, where the option future is already complete.
    static func of(_ channel: any Channel) -> PeerCredentials? {
        channel.eventLoop.preconditionInEventLoop()
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        let box = ResultBox()
        future.whenSuccess { box.value = PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
        return box.value
    }

    /// `@unchecked Sendable` — safe because the socket option future is already completed
    /// (a synchronous getsockopt on the channel's loop), so `whenSuccess` runs before `return`
    /// on this thread.
    private final class ResultBox: @unchecked Sendable {
        var value: PeerCredentials?
    }
}
