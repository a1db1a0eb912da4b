import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// What the kernel holds for a client that it has not read yet: SO_MEMINFO of the client's
/// socket (Linux 4.6), its write allocation for a Unix socket (sent, not yet read by the peer)
/// and its send queue for TCP (not yet taken by the peer's window), with the kernel's
/// bookkeeping. With what NIO holds, that is everything a client that stopped reading has
/// not taken.
package enum KernelQueue {
    /// SO_MEMINFO, which Glibc's Swift overlay does not name.
    static let option: Int32 = 55

    /// `struct sk_meminfo`'s nine counters, in the kernel's order (SK_MEMINFO_*).
    struct MemInfo: Sendable {
        var rmemAlloc: UInt32 = 0
        var rcvbuf: UInt32 = 0
        var wmemAlloc: UInt32 = 0
        var sndbuf: UInt32 = 0
        var fwdAlloc: UInt32 = 0
        var wmemQueued: UInt32 = 0
        var optmem: UInt32 = 0
        var backlog: UInt32 = 0
        var drops: UInt32 = 0
    }

    /// The bytes `channel`'s socket holds for its peer, unread; 0 when it cannot say. On the
    /// channel's loop (``SocketOptionNow``).
    package static func bytes(of channel: any Channel) -> Int {
        guard let info = SocketOptionNow.read(channel, level: SOL_SOCKET, name: option, as: MemInfo.self) else { return 0 }
        return Int(max(info.wmemAlloc, info.wmemQueued))
    }
}
