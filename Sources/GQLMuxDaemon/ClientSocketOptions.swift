import GQLMuxConfiguration
import GQLMuxVocabulary
import NIOCore
import NIOPosix

/// What every client's socket is given, whichever listener accepted it, or the previous process
/// (an adopted connection takes the same path).
enum ClientSocketOptions {
    /// The kernel send buffer each Unix-socket client is given (SO_SNDBUF; Linux doubles it,
    /// so 512 KiB instead of the default 208 KiB). A loop turn writes a burst of results to every
    /// subscriber at once, often over 100 KiB each: with the default, a client that had not yet
    /// read the last burst took the new one only in part, and the daemon kept and copied the
    /// rest (1 → 100 fan-out 1.1 to 1.35 times as fast with it, `gqlmux-bench`). It is what
    /// the kernel may hold for a client beyond ``DaemonConfiguration/Limits/clientBufferBytes``,
    /// not memory taken up front. A TCP client keeps the kernel's own sizing (autotuned).
    static let unixSendBufferBytes = 256 * 1_024
}

extension ServerBootstrap {
    /// The accepted connections of a listener for `origin` get the client socket options.
    func clientSocketOptions(_ limits: DaemonConfiguration.Limits, origin: ClientOrigin) -> ServerBootstrap {
        let marked = childChannelOption(.writeBufferWaterMark, value: .init(low: limits.clientBufferBytes / 2, high: limits.clientBufferBytes))
        guard origin != .endpointTCP else { return marked }
        return marked.childChannelOption(.socketOption(.so_sndbuf), value: SocketOptionValue(ClientSocketOptions.unixSendBufferBytes))
    }
}

extension ClientBootstrap {
    /// An adopted connection from `origin` gets the client socket options.
    func clientSocketOptions(_ limits: DaemonConfiguration.Limits, origin: ClientOrigin) -> ClientBootstrap {
        let marked = channelOption(.writeBufferWaterMark, value: .init(low: limits.clientBufferBytes / 2, high: limits.clientBufferBytes))
        guard origin != .endpointTCP else { return marked }
        return marked.channelOption(.socketOption(.so_sndbuf), value: SocketOptionValue(ClientSocketOptions.unixSendBufferBytes))
    }
}
