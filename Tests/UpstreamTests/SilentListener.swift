import Foundation
import NIOCore
import NIOPosix

/// A TCP listener on 127.0.0.1 that accepts and then never answers (a stuck proxy).
final class ServerSocketThatNeverAnswers: Sendable {
    let channel: any Channel
    let group: MultiThreadedEventLoopGroup
    var port: Int { channel.localAddress!.port! }

    init() throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        channel = try ServerBootstrap(group: group)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    func close() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// A one-loop group owned by a test.
final class MultiThreadedEventLoopGroupHolder: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var loop: any EventLoop { group.next() }
    func shutdown() async { try? await group.shutdownGracefully() }
}
