#if canImport(Glibc)
import Glibc
#endif

/// Holds a loopback TCP port for a test server's whole life, so that a server started (or
/// restarted after a kill) on it cannot lose it to another process: a socket bound to the port
/// with `SO_REUSEADDR` that never listens. While no server listens, connections to the port are
/// refused, as for a stopped server; a server that binds it with `SO_REUSEADDR` (NIO's
/// `ServerBootstrap` with that option, uvicorn, Prometheus) can. A port picked by binding 0 and
/// closing, then bound again by the server, could be taken in between.
package final class PortReservation: Sendable {
    package let port: Int
    private let fd: Int32

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "bind 127.0.0.1:0: \(reason)")
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
