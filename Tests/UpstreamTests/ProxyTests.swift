import HTTPStreaming
import NIOCore
import NIOEmbedded
import Testing

@testable import Upstream

/// `[upstream] proxy` and the environment read, and the CONNECT tunnel's handler driven on an
/// `EmbeddedChannel` (no socket adds anything to what it decides).
@Suite struct ProxyTests {
    @Test func proxyURLsAreParsedWithPercentEncodedCredentials() throws {
        let proxy = try HTTPProxy(parsing: "http://gq%20l:p%40ss%3Aw@proxy.corp:3128")
        #expect(proxy.host == "proxy.corp" && proxy.port == 3128)
        #expect(proxy.authorization == "Basic Z3EgbDpwQHNzOnc=")  // base64("gq l:p@ss:w")
        #expect(try HTTPProxy(parsing: "proxy.corp:8080").port == 8080)
        #expect(try HTTPProxy(parsing: "http://[::1]:3128/").host == "::1")
        #expect(try HTTPProxy(parsing: "http://proxy").port == 80)
        #expect(try HTTPProxy(parsing: "http://proxy").authorization == nil)
        for bad in [
            "https://proxy:443", "socks5://proxy:1080", "http://proxy:0", "http://proxy:x", "http://:3128", "http://proxy/path", "http://u:%zz@proxy:1",
        ] {
            #expect(throws: HTTPProxy.ParseError.self, "\(bad)") { try HTTPProxy(parsing: bad) }
        }
        let error = #expect(throws: HTTPProxy.ParseError.self) { try HTTPProxy(parsing: "https://user:secret@proxy:1") }
        #expect(error?.description.contains("secret") == false, "a password never reaches a message")
    }

    @Test func theEnvironmentIsReadAsCurlReadsIt() throws {
        #expect(try ProxyChoice.fromEnvironment([:]) == .direct)
        let choice = try ProxyChoice.fromEnvironment([
            "HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "http_proxy": "plain:3",
            "no_proxy": "localhost, .internal.example,10.0.0.7,svc:8443",
        ])
        #expect(choice.proxy(host: "api.example", port: 443, secure: true)?.host == "lower")
        #expect(choice.proxy(host: "api.example", port: 80, secure: false)?.host == "plain")
        #expect(choice.proxy(host: "localhost", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "a.internal.example", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "internal.example", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "notinternal.example", port: 443, secure: true) != nil)
        #expect(choice.proxy(host: "10.0.0.7", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "svc", port: 8443, secure: true) == nil)
        #expect(choice.proxy(host: "svc", port: 443, secure: true) != nil)
        #expect(try ProxyChoice.fromEnvironment(["http_proxy": "http://p:1", "no_proxy": "*"]).proxy(host: "x", port: 80, secure: false) == nil)
        #expect(try ProxyChoice.fromEnvironment(["http_proxy": "http://p:1"]).proxy(host: "x", port: 443, secure: true) == nil)
        #expect(throws: HTTPProxy.ParseError.self) { try ProxyChoice.fromEnvironment(["https_proxy": "socks5://p:1"]) }
        #expect(ProxyChoice.always(try HTTPProxy(parsing: "p:1")).proxy(host: "localhost", port: 1, secure: false) != nil)
    }

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
