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
        guard let address = localAddress(fd, as: sockaddr_storage.self) else { return nil }
        switch Int32(address.ss_family) {
        case AF_INET: return withUnsafeBytes(of: address) { Int(UInt16(bigEndian: $0.load(as: sockaddr_in.self).sin_port)) }
        case AF_INET6: return withUnsafeBytes(of: address) { Int(UInt16(bigEndian: $0.load(as: sockaddr_in6.self).sin6_port)) }
        default: return nil
        }
    }

    /// The path a Unix socket is bound to (for logs and status).
    package static func boundPath(_ fd: CInt) -> String? {
        guard var address = localAddress(fd, as: sockaddr_un.self) else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// `getsockname` into an address of type `Address`.
    private static func localAddress<Address>(_ fd: CInt, as: Address.Type) -> Address? {
        let storage = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<Address>.size, alignment: MemoryLayout<Address>.alignment)
        defer { storage.deallocate() }
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<Address>.size)
        var length = socklen_t(MemoryLayout<Address>.size)
        guard getsockname(fd, storage.assumingMemoryBound(to: sockaddr.self), &length) == 0 else { return nil }
        return storage.load(as: Address.self)
    }
}
