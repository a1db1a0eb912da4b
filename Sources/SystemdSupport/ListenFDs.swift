import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Socket activation: the listening socket systemd passes as fd 3 (`LISTEN_FDS`).
package enum ListenFDs {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// What systemd passed: the socket units' listeners and what the previous process left in
    /// the file descriptor store.
    package struct Passed {
        /// The line socket's listener (`gqlmux`, or unnamed).
        package var line: CInt?
        /// The GraphQL endpoint's (`graphql`).
        package var graphql: CInt?
        /// Descriptors from the store, named `handover-…` (``FileDescriptorStore``), in order.
        package var stored: [(name: String, fd: CInt)] = []
    }

    /// The prefix of every name gqlmuxd gives what it leaves in the file descriptor store.
    package static let storedPrefix = "handover-"

    /// The listening Unix stream sockets systemd passed, by their `FileDescriptorName=`:
    /// `graphql` is the local GraphQL endpoint's; the other one (`gqlmux`, or unnamed) is the
    /// line socket. Both nil when not socket-activated. Descriptors named `handover-…` come
    /// from the file descriptor store and are passed on as they are.
    /// - Throws: when systemd passed something else, or more than one of a kind.
    package static func adopt() throws(Failure) -> Passed {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        if count < 0 { throw Failure(description: "LISTEN_FDS: \(String(cString: strerror(-count)))") }
        defer {
            if let names {
                for index in 0..<Int(max(count, 0)) { free(names[index]) }
                free(names)
            }
        }
        var passed = Passed()
        for index in 0..<count {
            let fd = SD_LISTEN_FDS_START + index
            let name = names?[Int(index)].map { String(cString: $0) } ?? ""
            if name.hasPrefix(storedPrefix) {
                passed.stored.append((name, fd))
                continue
            }
            guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
                throw Failure(description: "fd \(fd) (\(name)) from systemd is not a listening Unix stream socket")
            }
            if name == "graphql" {
                guard passed.graphql == nil else { throw Failure(description: "two sockets named 'graphql' from systemd") }
                passed.graphql = fd
            } else {
                guard passed.line == nil else { throw Failure(description: "expected one line socket from systemd, got another ('\(name)')") }
                passed.line = fd
            }
        }
        return passed
    }

    /// The port an IPv4 or IPv6 socket is bound to.
    package static func boundPort(_ fd: CInt) -> Int? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        case AF_INET6:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        default:
            return nil
        }
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
