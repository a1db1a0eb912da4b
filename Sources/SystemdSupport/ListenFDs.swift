import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Socket activation: the listening socket systemd passes as fd 3 (`LISTEN_FDS`).
package enum ListenFDs {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The adopted listening Unix stream socket, or nil when not socket-activated.
    /// - Throws: when systemd passed something else, or more than one socket.
    package static func adoptUnixListener() throws(Failure) -> CInt? {
        let count = sd_listen_fds(1)
        if count < 0 { throw Failure(description: "LISTEN_FDS: \(String(cString: strerror(-count)))") }
        if count == 0 { return nil }
        guard count == 1 else { throw Failure(description: "expected one socket from systemd, got \(count)") }
        let fd = SD_LISTEN_FDS_START
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw Failure(description: "fd \(fd) from systemd is not a listening Unix stream socket")
        }
        return fd
    }

    /// The path a Unix socket is bound to (for logs and status).
    package static func boundPath(_ fd: CInt) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }
}
