import NIOCore
import NIOPosix
import SystemdSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The socket details the daemon reads through `SystemdSupport`, over real Unix sockets: a
/// socket file bound and probed, a peer's credentials, a socket's cookie read through NIO on
/// its loop and straight from its descriptor, and the kernel's unread bytes.
@Suite struct SocketDetailsTests {
    struct Accepted: Sendable {
        var peer: PeerCredentials?
        var cookie: UInt64?
        var unread: Int
    }

    @Test func aSocketFileIsServedWhileListenedOnAndReplacedWhenStale() throws {
        let directory = try Paths.temporaryDirectory("gqlmux-socket-file")
        let path = directory + "/s.sock"
        #expect(!UnixSocketFile.isServed(path), "no file: nobody serves it")
        let fd = try UnixSocketFile.listen(at: path)
        #expect(UnixSocketFile.isServed(path))
        close(fd)
        #expect(!UnixSocketFile.isServed(path), "a stale file left by a closed listener")
        let again = try UnixSocketFile.listen(at: path)
        defer { close(again) }
        #expect(UnixSocketFile.isServed(path), "the stale file replaced")
        let long = directory + "/" + String(repeating: "x", count: 120)
        #expect(throws: UnixSocketFile.Failure.self) { _ = try UnixSocketFile.listen(at: long) }
        #expect(!UnixSocketFile.isServed(long))
    }

    @Test func aPeersCredentialsAndCookiesAreReadAtOnceOnTheLoop() async throws {
        let directory = try Paths.temporaryDirectory("gqlmux-socket-details")
        let path = directory + "/d.sock"
        let group = MultiThreadedEventLoopGroup.singleton
        let fd = try UnixSocketFile.listen(at: path)
        let accepted = group.next().makePromise(of: Accepted.self)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { child in
                accepted.succeed(Accepted(peer: PeerCredentials.of(child), cookie: SocketOptionNow.cookie(of: child), unread: KernelQueue.bytes(of: child)))
                return child.eventLoop.makeSucceededVoidFuture()
            }
            .withBoundSocket(fd).get()
        let client = try await ClientBootstrap(group: group).connect(unixDomainSocketPath: path).get()
        let serverCookie = try await server.eventLoop.submit { SocketOptionNow.cookie(of: server) }.get()
        #expect(serverCookie != nil)
        #expect(serverCookie == SocketOptionNow.cookie(ofDescriptor: fd), "through NIO and straight from the descriptor alike")
        let (peer, cookie, unread) = try await accepted.futureResult.map { ($0.peer, $0.cookie, $0.unread) }.get()
        let credentials = try #require(peer)
        #expect(credentials.pid == getpid())
        #expect(credentials.uid == getuid())
        #expect(credentials.gid == getegid())
        #expect(PeerCredentials.processName(pid: credentials.pid)?.isEmpty == false)
        #expect(cookie != nil && cookie != serverCookie, "each socket has its own cookie")
        #expect(unread == 0, "nothing written to the peer yet")
        #expect(SocketOptionNow.cookie(ofDescriptor: -1) == nil)
        try await client.close()
        try await server.close()
    }
}
