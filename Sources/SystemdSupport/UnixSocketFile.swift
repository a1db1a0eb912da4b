import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A Unix stream socket at a path in the file system, as the daemon listens on one: bound by
/// these calls, not by NIO, whose own listeners remove their file when closed (a listener
/// handed to the next process must keep its path, and the daemon removes the file itself on a
/// stop).
package enum UnixSocketFile {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// A socket bound to `path` (a stale socket file there replaced) and listening, with
    /// `backlog`; close-on-exec.
    package static func listen(at path: String, backlog: Int32 = 1024) throws(Failure) -> CInt {
        guard var address = address(path) else { throw Failure("socket path too long: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        var status: stat = stat()
        if lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let failure = Failure("cannot listen on \(path): \(String(cString: strerror(errno)))")
            close(fd)
            throw failure
        }
        return fd
    }

    /// Whether a process accepts connections on `path` now (a connect succeeds): a live daemon's
    /// socket, not to be taken over. False for no file, a stale socket, or a path too long.
    package static func isServed(_ path: String) -> Bool {
        guard var address = address(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return connected == 0
    }

    /// `path` as a Unix socket address; nil when it does not fit `sun_path` with its NUL.
    private static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return address
    }
}
