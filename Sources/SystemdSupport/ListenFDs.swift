import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Socket activation: the listening socket systemd passes as fd 3 (`LISTEN_FDS`).
package enum ListenFDs {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The listening Unix stream sockets systemd passed, by their `FileDescriptorName=`:
    /// `graphql` is the local GraphQL endpoint's; the other one (`gqlmux`, or unnamed) is the
    /// line socket. Both nil when not socket-activated.
    /// - Throws: when systemd passed something else, or more than one of a kind.
    package static func adoptUnixListeners() throws(Failure) -> (line: CInt?, graphql: CInt?) {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        if count < 0 { throw Failure(description: "LISTEN_FDS: \(String(cString: strerror(-count)))") }
        defer {
            if let names {
                for index in 0..<Int(max(count, 0)) { free(names[index]) }
                free(names)
            }
        }
        var line: CInt?
        var graphql: CInt?
        for index in 0..<count {
            let fd = SD_LISTEN_FDS_START + index
            let name = names?[Int(index)].map { String(cString: $0) } ?? ""
            guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
                throw Failure(description: "fd \(fd) (\(name)) from systemd is not a listening Unix stream socket")
            }
            if name == "graphql" {
                guard graphql == nil else { throw Failure(description: "two sockets named 'graphql' from systemd") }
                graphql = fd
            } else {
                guard line == nil else { throw Failure(description: "expected one line socket from systemd, got another ('\(name)')") }
                line = fd
            }
        }
        return (line, graphql)
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
