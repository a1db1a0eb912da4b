import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A real datagram socket to act as systemd's `NOTIFY_SOCKET` (file path or abstract name).
/// `@unchecked Sendable` — safe because every property is a `let`: the datagrams its reader
/// thread receives go into a lock-protected box, and the `Thread` is only started and kept.
final class NotifySocket: Changing, @unchecked Sendable {
    let changes = Changes()
    let fd: Int32
    /// The value for `NOTIFY_SOCKET`: a path, or `@name` for the abstract namespace.
    let address: String
    private let box = NIOLockedValueBox<[String]>([])
    private let thread: Thread

    init(abstract: Bool, directory: String) throws {
        let sock = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        fd = sock
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let name = abstract ? "gqlmux-test-notify-\(UUID().uuidString.prefix(8))" : directory + "/notify.sock"
        let bytes = (abstract ? [UInt8(0)] : []) + Array(name.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let result = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, length) } }
        guard result == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        address = abstract ? "@" + name : name
        let fd = self.fd
        let box = self.box
        let changes = self.changes
        thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !Thread.current.isCancelled {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    box.withLockedValue { $0.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
                    changes.changed()
                }
            }
        }
        thread.start()
    }

    /// Every datagram received so far.
    var messages: [String] { box.withLockedValue { $0 } }

    /// Every `KEY=value` assignment received so far, in order, split as systemd splits a
    /// notification: at every LF and every CR.
    var lines: [String] { messages.flatMap { $0.split { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }.map(String.init) } }

    func close() {
        thread.cancel()
        Thread.sleep(forTimeInterval: 0.15)
        Glibc.close(fd)
    }
}
