import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// The service manager's file descriptor store (`FileDescriptorStoreMax=` in the unit):
/// descriptors handed to it with `FDSTORE=1` and a name outlive this process and come back to
/// the next one in `LISTEN_FDS`, named in `LISTEN_FDNAMES`, until removed (`FDSTOREREMOVE=1`)
/// or until the service stops for good.
package enum FileDescriptorStore {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// How many descriptors the store holds for this service: `$FDSTORE`, which systemd 254 and
    /// later set from `FileDescriptorStoreMax=` and gqlmuxd.service sets itself for systemd 252.
    /// nil when there is no store (no `NOTIFY_SOCKET`, or no `FDSTORE`): a stop is then a stop.
    package static var capacity: Int? {
        guard getenv("NOTIFY_SOCKET") != nil, let raw = getenv("FDSTORE"), let limit = Int(String(cString: raw)), limit > 0 else { return nil }
        return limit
    }

    /// Hands `descriptors` to the store under `name` (the kernel passes at most 253 per
    /// message; they go in batches). Systemd keeps its own copies: closing ours after this
    /// closes nothing the store holds.
    package static func store(_ descriptors: [CInt], name: String) throws(Failure) {
        var start = 0
        while start < descriptors.count {
            let batch = Array(descriptors[start..<min(start + 250, descriptors.count)])
            let sent = batch.withUnsafeBufferPointer { fds in
                sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=\(name)", fds.baseAddress, UInt32(fds.count))
            }
            guard sent > 0 else { throw Failure(description: "FDSTORE=1 (\(name)): \(sent == 0 ? "no NOTIFY_SOCKET" : String(cString: strerror(-sent)))") }
            start += batch.count
        }
    }

    /// Empties the store of the descriptors named `name`.
    package static func remove(name: String) {
        _ = sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=\(name)")
    }

    /// Waits until the service manager has read every message sent before (at most `timeout`),
    /// so nothing stored is lost when this process exits right after.
    package static func barrier(timeout: Duration = .seconds(5)) throws(Failure) {
        let (seconds, attoseconds) = timeout.components
        let result = sd_notify_barrier(0, UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000))
        guard result >= 0 else { throw Failure(description: "BARRIER=1: \(String(cString: strerror(-result)))") }
    }

    // MARK: - The state beside the descriptors

    /// A memory file holding `bytes`, sealed (`F_SEAL_SHRINK`, `F_SEAL_GROW`, `F_SEAL_WRITE`)
    /// before it is stored: no process that holds it, this one included, can change it after.
    package static func memoryFile(_ bytes: [UInt8], name: String) throws(Failure) -> CInt {
        let fd = gqlmux_memfd_create(name)
        guard fd >= 0 else { throw Failure(description: "memfd_create: \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let failure = Failure(description: "writing the handover record: \(String(cString: strerror(errno)))")
                close(fd)
                throw failure
            }
            written += n
        }
        guard gqlmux_memfd_seal(fd) == 0 else {
            let failure = Failure(description: "sealing the handover record: \(String(cString: strerror(errno)))")
            close(fd)
            throw failure
        }
        return fd
    }

    /// Everything in a stored memory file, read from its start; at most `limit` bytes. A file
    /// without the seals ``memoryFile(_:name:)`` puts on is refused: it could change as it is
    /// read. One exception keeps upgrades seamless: a memory file made without sealing support
    /// (its only seal `F_SEAL_SEAL`), as gqlmuxd wrote its record before it sealed it; the
    /// record's checksum still refuses one that changed.
    package static func contents(of fd: CInt, limit: Int = 256 << 20) throws(Failure) -> [UInt8] {
        let fixed: CInt = 0x0002 | 0x0004 | 0x0008  // F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE
        let seals = gqlmux_memfd_seals(fd)
        guard seals >= 0, seals & fixed == fixed || seals == 0x0001 /* F_SEAL_SEAL only */ else {
            throw Failure(description: "the handover record is not a sealed memory file")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var offset: off_t = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw Failure(description: "reading the handover record: \(String(cString: strerror(errno)))") }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
            offset += off_t(n)
            guard bytes.count <= limit else { throw Failure(description: "the handover record is larger than \(limit) bytes") }
        }
    }

    /// A memory file holding `bytes` as gqlmuxd stored its record before it sealed it: no
    /// sealing support at all. For the tests of reading such a record.
    package static func unsealableMemoryFile(_ bytes: [UInt8]) -> CInt {
        let fd = gqlmux_memfd_create_unsealable("gqlmux-handover")
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return fd
    }

    /// A memory file holding `bytes` that could be sealed and is not (anyone holding it may
    /// still change it). For the tests of refusing such a record.
    package static func unsealedMemoryFile(_ bytes: [UInt8]) -> CInt {
        let fd = gqlmux_memfd_create("gqlmux-handover")
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return fd
    }

    // MARK: - Finding sockets again

    /// A socket's cookie (`SO_COOKIE`): the kernel's name for it, the same in every process
    /// that holds it. nil for a descriptor that is not a socket (``SocketOptionNow/cookie(ofDescriptor:)``).
    package static func cookie(of fd: CInt) -> UInt64? { SocketOptionNow.cookie(ofDescriptor: fd) }

    /// This process's open socket descriptors, by cookie.
    package static func socketsByCookie() -> [UInt64: CInt] {
        var found: [UInt64: CInt] = [:]
        guard let directory = opendir("/proc/self/fd") else { return found }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = CInt(name), fd != own, let cookie = cookie(of: fd) else { continue }
            found[cookie] = fd
        }
        return found
    }
}

extension FileDescriptorStore {
    /// Why the service manager stops this process, as far as it can be asked.
    package enum Ending: Equatable, Sendable {
        /// A restart (`systemctl restart`, `try-restart`, a package upgrade): the store is
        /// kept for the next process.
        case restart
        /// `systemctl stop` (or the system shutting down): the store is emptied after us.
        case stop
        /// No job runs on the unit (a signal sent by hand), or the job has another type.
        case other(String)
        /// The system bus could not be asked (none runs, or it refused).
        case unknown(String)
    }

    /// The job the service manager runs on this process's unit now, over the system bus.
    package static func ending() -> Ending {
        var type = [CChar](repeating: 0, count: 64)
        let result = gqlmux_unit_job_type(&type, type.count)
        guard result >= 0 else { return .unknown(String(cString: strerror(-result))) }
        let name = String(decoding: type.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch name {
        case "restart", "try-restart", "reload-or-restart", "try-reload-or-restart": return .restart
        case "stop": return .stop
        default: return .other(name.isEmpty ? "no job" : name)
        }
    }
}
