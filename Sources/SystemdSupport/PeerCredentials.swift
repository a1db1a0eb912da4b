import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The peer of a Unix socket as the kernel reports it: SO_PEERCRED (pid, uid, primary gid) and
/// SO_PEERGROUPS (its supplementary groups), both as they were when it connected.
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    /// The primary (effective) group.
    package var gid: UInt32
    /// The supplementary groups (`usermod -aG`), ascending. Empty when the kernel could not give
    /// them (more than ``PeerGroups/capacity``).
    package var groups: [UInt32] = []

    /// Whether the peer is in any of `gids`, by its primary group or a supplementary one.
    package func isInAnyGroup(of gids: [UInt32]) -> Bool {
        gids.contains(gid) || groups.contains(where: gids.contains)
    }

    /// The name of process `pid` as the kernel keeps it (`/proc/PID/comm`, at most 15
    /// characters); nil when it cannot be read (the process is gone, or /proc is not mounted).
    package static func processName(pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        let fd = Glibc.open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        let text = bytes[..<count]
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) }) else { return nil }
        let name = String(decoding: text[first...last], as: UTF8.self)
        return name.isEmpty ? nil : String(name.prefix(64))
    }

    /// Mirrors `struct ucred`, which Glibc does not export to Swift.
    private struct UCred {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Reads the credentials of `channel`'s peer; nil when the channel is not a Unix socket.
    /// On the channel's loop (``SocketOptionNow``).
    package static func of(_ channel: any Channel) -> PeerCredentials? {
        guard let peer = SocketOptionNow.read(channel, level: SOL_SOCKET, name: SO_PEERCRED, as: UCred.self) else { return nil }
        var credentials = PeerCredentials(pid: peer.pid, uid: peer.uid, gid: peer.gid)
        if let groups = SocketOptionNow.read(channel, level: SOL_SOCKET, name: PeerGroups.option, as: PeerGroups.self) {
            credentials.groups = groups.gids
        }
        return credentials
    }
}

/// The buffer SO_PEERGROUPS fills: up to ``capacity`` gids (a peer with more gets ERANGE, and
/// is matched by its primary group only).
struct PeerGroups: Sendable {
    /// SO_PEERGROUPS (Linux 4.13), which Glibc's Swift overlay does not name.
    static let option: Int32 = 59
    static let capacity = 256
    private var storage = InlineArray<256, UInt32>(repeating: 0)

    /// The groups held. The kernel gives them sorted ascending and NIO zero-fills the buffer
    /// past them, so the zeros after the first entry are not groups; a first 0 is group 0 (root)
    /// when a group follows it. (Group 0 as a peer's only supplementary group reads as none:
    /// it is still matched as a primary group.)
    var gids: [UInt32] {
        var held: [UInt32] = []
        for index in 0..<Self.capacity {
            let gid = storage[index]
            if gid == 0, index > 0 { break }
            held.append(gid)
        }
        return held == [0] ? [] : held
    }
}
