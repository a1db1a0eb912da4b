import HTTPStreaming
import NIOCore
import NIOEmbedded
import Testing

@testable import Upstream

/// The CONNECT tunnel's handler driven on an `EmbeddedChannel` (no socket adds anything to what
/// it decides); the proxy settings it is given are tested in UpstreamSettingsTests.
@Suite struct ProxyTests {
    func tunnel(_ proxy: String = "http://u:pw@proxy:3128") throws -> (EmbeddedChannel, ProxyTunnelHandler) {
        let channel = EmbeddedChannel()
        let handler = ProxyTunnelHandler(
            proxy: try HTTPProxy(parsing: proxy),
            target: "api.example:443",
            established: channel.eventLoop.makePromise()
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        return (channel, handler)
    }

    @Test func writesWaitForTheTunnelThenFlowUnchanged() throws {
        let (channel, handler) = try tunnel()
        let activeSeen = ActiveRecorder()
        try channel.pipeline.syncOperations.addHandler(activeSeen)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        let connect = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: connect) == "CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\nProxy-Authorization: Basic dTpwdw==\r\n\r\n")
        #expect(activeSeen.active == 0, "the handlers behind see no active channel before the tunnel")
        channel.writeAndFlush(ByteBuffer(string: "client hello"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "held until the proxy answers")
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        try channel.writeInbound(ByteBuffer(string: "Proxy-Agent: test\r\n\r\nserver hello"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "client hello"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "server hello"))
        #expect(activeSeen.active == 1)
        try handler.established.futureResult.wait()
        #expect(throws: (any Error).self) { try channel.pipeline.syncOperations.handler(type: ProxyTunnelHandler.self) }
        _ = try channel.finish()
    }

    @Test func aRefusalFailsTheConnectWithTheProxysStatusAndSendsNothingOn() throws {
        let (channel, handler) = try tunnel("http://proxy:3128")
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        let connect = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(!String(buffer: connect).contains("Proxy-Authorization"))
        channel.writeAndFlush(ByteBuffer(string: "secret request"), promise: nil)
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.0 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"))
        let error = #expect(throws: ProxyTunnelError.self) { try handler.established.futureResult.wait() }
        #expect(error?.description == "api.example:443 through proxy proxy:3128: CONNECT refused: HTTP 407 Proxy Authentication Required")
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing reaches the server")
        #expect(!channel.isActive)
    }

    @Test func anAnswerThatIsNotHTTPOrNeverEndsIsRefused() throws {
        let (channel, handler) = try tunnel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        try channel.writeInbound(ByteBuffer(repeating: UInt8(ascii: "x"), count: ProxyAnswer.maxHeadBytes + 1))
        let error = #expect(throws: ProxyTunnelError.self) { try handler.established.futureResult.wait() }
        #expect(error?.reason.contains("no end") == true)
        let (other, otherHandler) = try tunnel()
        try other.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        try other.writeInbound(ByteBuffer(string: "SSH-2.0-OpenSSH\r\n\r\n"))
        let notHTTP = #expect(throws: ProxyTunnelError.self) { try otherHandler.established.futureResult.wait() }
        #expect(notHTTP?.reason.contains("not HTTP") == true)
    }
}

/// Counts the `channelActive` events that reach the handlers behind the tunnel.
private final class ActiveRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var active = 0
    func channelActive(context: ChannelHandlerContext) {
        active += 1
        context.fireChannelActive()
    }
}
