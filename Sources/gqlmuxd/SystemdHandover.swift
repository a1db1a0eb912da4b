import GQLMuxConfiguration
import GQLMuxDaemon
import NIOCore
import SystemdSupport

#if canImport(Glibc)
import Glibc
#endif

/// The online restart's part that talks to systemd: what a stopping gqlmuxd leaves in the file
/// descriptor store, and what the next one takes back out of it. Every name starts with
/// `handover-`: `handover-state` (the record, a memory file), `handover-client` (each carried
/// connection), `handover-line`, `handover-graphql`, `handover-tcp` (this process's own
/// listeners; a socket unit's stay with the unit).
enum SystemdHandover {
    /// Stores `package` (the daemon's handover) and waits until systemd has read it all.
    static func store(_ package: Daemon.HandoverPackage, capacity: Int, loop: any EventLoop) throws {
        let sockets = FileDescriptorStore.socketsByCookie()
        let clients = package.clients.compactMap { sockets[$0] }
        let listeners = package.listeners.compactMap { name, cookie in sockets[cookie].map { (name, $0) } }
        guard clients.count + listeners.count + 1 <= capacity else {
            throw FileDescriptorStore.Failure(
                description: "\(clients.count) clients and \(listeners.count) listeners do not fit FileDescriptorStoreMax=\(capacity)"
            )
        }
        let record = try FileDescriptorStore.memoryFile(package.record, name: "gqlmux-handover")
        defer { close(record) }
        try FileDescriptorStore.store([record], name: "handover-state")
        try FileDescriptorStore.store(clients, name: "handover-client")
        HandoverFault.reached(.storing, loop: loop)
        for (name, fd) in listeners { try FileDescriptorStore.store([fd], name: "handover-\(name)") }
        try FileDescriptorStore.barrier()
        HandoverFault.reached(.stored, loop: loop)
    }

    /// Whether this SIGTERM is a restart, and why: systemd's job on the unit, over the system
    /// bus. A stop empties the store after us, so its clients are closed as without one (told
    /// SHUTTING_DOWN, a WebSocket's close frame). When the bus cannot be asked, the clients are
    /// handed over: on a stop they then see their connection end without those words.
    static func stopIsRestart() -> (Bool, String) {
        switch FileDescriptorStore.ending() {
        case .restart: (true, "systemd restarts the unit")
        case .stop: (false, "systemd stops the unit")
        case .other(let job): (false, "SIGTERM without a restart job (\(job))")
        case .unknown(let why): (true, "the service manager's job cannot be asked (\(why)); assuming a restart")
        }
    }

    /// What the previous process left, read and taken out of the store (this process holds its
    /// own copies now; what it does not adopt, it closes). A listener whose address is no
    /// longer the configured one is closed, and the daemon binds the new address.
    static func inheritance(_ stored: [(name: String, fd: CInt)], configuration: DaemonConfiguration) -> Daemon.Inheritance {
        var inheritance = Daemon.Inheritance()
        for (name, fd) in stored {
            switch name {
            case "handover-state":
                do {
                    inheritance.record = .success(try FileDescriptorStore.contents(of: fd))
                } catch {
                    inheritance.record = .failure(DaemonError("\(error)"))
                }
                close(fd)
            case "handover-client":
                inheritance.clients.append((fd, FileDescriptorStore.cookie(of: fd)))
            case "handover-line" where inheritance.line == nil && ListenFDs.boundPath(fd) == configuration.socketPath:
                inheritance.line = fd
            case "handover-graphql"
            where inheritance.graphql == nil
                && ListenFDs.boundPath(fd) == configuration.graphqlEndpoint.socketPath(beside: configuration.socketPath):
                inheritance.graphql = fd
            case "handover-tcp" where inheritance.tcp == nil && ListenFDs.boundPort(fd) == configuration.graphqlEndpoint.listen?.port:
                inheritance.tcp = fd
            default:
                close(fd)
            }
        }
        for name in Set(stored.map(\.name)) { FileDescriptorStore.remove(name: name) }
        return inheritance
    }
}
