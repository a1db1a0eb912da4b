import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import Upstream

/// The transport's protocol behaviour over `EmbeddedChannel`s on an embedded loop's clock: what
/// it writes, what it does with what the server sends, and its timeouts, exactly and without
/// waiting. A socket adds nothing here (the frames are the same); the socket paths (upgrade,
/// headers, TLS, refused connects, a server killed) are tested against a real server in
/// `TransportTests`.
@Suite struct EmbeddedTransportTests {
    /// A transport whose every connect is a new `EmbeddedChannel` holding its frame handler.
    /// `@unchecked Sendable` — safe because the embedded loop runs on the test's own thread:
    /// the connector and every assertion run there, one at a time; the connector and `sent()`
    /// check it with `preconditionInEventLoop`.
    final class Rig: @unchecked Sendable {
        let loop = EmbeddedEventLoop()
        let recorder = Recorder()
        private(set) var channels: [EmbeddedChannel] = []
        var transport: UpstreamTransport!
        private var nextID = 0

        init(_ configure: (inout UpstreamConfiguration) -> Void = { _ in }) throws {
            var configuration = UpstreamConfiguration(url: try UpstreamURL("ws://127.0.0.1:1/graphql"))
            configuration.transport.backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0)
            configure(&configuration)
            let loop = self.loop
            transport = UpstreamTransport(
                configuration: configuration,
                sslContext: nil,
                payloads: ConnectingPayloadSource(eventLoop: loop),
                eventLoop: loop,
                observer: { [recorder] in recorder.observe($0) },
                connector: { [unowned self] _, _, _, frameHandler in
                    loop.preconditionInEventLoop()
                    let channel = EmbeddedChannel(handler: frameHandler(), loop: loop)
                    self.channels.append(channel)
                    _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
                    return loop.makeSucceededFuture(.init(channel: channel, wire: .transportWS))
                },
                clock: { Instant(nanoseconds: Int64(loop.now.uptimeNanoseconds)) }
            )
            transport.updates = recorder.sink
        }

        var channel: EmbeddedChannel { channels[channels.count - 1] }

        func start() {
            transport.start()
            loop.run()
        }

        /// Subscribes under `key`; returns the wire id.
        @discardableResult
        func subscribe(_ key: String, kind: OperationKind = .subscription) -> String {
            let id = recorder.track(key)
            transport.openOnLoop(id, kind: kind, payload: ByteBuffer(string: #"{"query":"subscription { tick }"}"#))
            loop.run()
            return "\(id)"
        }

        /// The messages the transport wrote on the newest connection since the last call:
        /// text frames as their text, a close frame as `close CODE`, a pong as `pong DATA`.
        func sent() throws -> [String] {
            loop.preconditionInEventLoop()
            var out: [String] = []
            while let frame = try channel.readOutbound(as: WebSocketFrame.self) {
                // As written: the encoder, not in this pipeline, applies the mask key.
                var data = frame.data
                switch frame.opcode {
                case .connectionClose: out.append("close \(data.readInteger(as: UInt16.self) ?? 0)")
                case .pong: out.append("pong " + String(buffer: data))
                default: out.append(String(buffer: data))
                }
            }
            return out
        }

        func serverSends(_ text: String) throws {
            try serverSends(.text, ByteBuffer(string: text))
        }

        /// One frame, as the server's bytes on the wire (NIO's own encoder writes them).
        func serverSends(_ opcode: WebSocketOpcode, _ data: ByteBuffer) throws {
            let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
            try encoder.writeOutbound(WebSocketFrame(fin: true, opcode: opcode, data: data))
            var bytes = ByteBuffer()
            while var part = try encoder.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
            try channel.writeInbound(bytes)
            loop.run()
        }

        /// Connects and acknowledges: the transport's `connection_init` is read.
        func connectAndAck() throws {
            start()
            let first = try sent()
            #expect(first == [#"{"type":"connection_init"}"#], "\(first) \(recorder.events)")
            try serverSends(#"{"type":"connection_ack"}"#)
        }

        func advance(_ amount: TimeAmount) { loop.advanceTime(by: amount) }
    }

    @Test func subscribesAfterTheAckAndDeliversResults() throws {
        let rig = try Rig()
        let id = rig.subscribe("s")
        try rig.connectAndAck()
        #expect(try rig.sent() == [#"{"type":"subscribe","id":"\#(id)","payload":{"query":"subscription { tick }"}}"#])
        #expect(rig.recorder.states("s") == [.pending, .active])
        try rig.serverSends(#"{"type":"next","id":"\#(id)","payload":{"data":{"tick":1}}}"#)
        try rig.serverSends(#"{"type":"complete","id":"\#(id)"}"#)
        #expect(rig.recorder.nexts("s") == [#"{"data":{"tick":1}}"#])
        #expect(rig.recorder.finish("s") == .completed)
    }

    /// A read's messages are all told before `readEnded`, which is told once per read, when
    /// NIO's read completes: three results in one read, then a lone one in the next.
    @Test func aReadIsToldEndedOnceItsResultsAreAllTold() throws {
        let rig = try Rig()
        let id = rig.subscribe("s")
        try rig.connectAndAck()
        _ = try rig.sent()
        let log = NIOLockedValueBox<[String]>([])
        let record = rig.recorder.sink
        rig.transport.updates = { operation, update in
            if case .next(let payload) = update { log.withLockedValue { $0.append(String(buffer: payload)) } }
            record(operation, update)
        }
        rig.transport.readEnded = { log.withLockedValue { $0.append("read ended") } }
        let next = { (tick: Int) in #"{"type":"next","id":"\#(id)","payload":{"data":{"tick":\#(tick)}}}"# }
        let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
        var bytes = ByteBuffer()
        for tick in 1...3 {
            try encoder.writeOutbound(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: next(tick))))
            while var part = try encoder.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        }
        // One read: NIO fires the read, then its completion.
        rig.channel.pipeline.syncOperations.fireChannelRead(NIOAny(bytes))
        #expect(log.withLockedValue { $0 } == [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#, #"{"data":{"tick":3}}"#])
        rig.channel.pipeline.syncOperations.fireChannelReadComplete()
        try rig.serverSends(next(4))  // writeInbound: a read and its completion
        #expect(
            log.withLockedValue { $0 } == [
                #"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#, #"{"data":{"tick":3}}"#, "read ended", #"{"data":{"tick":4}}"#, "read ended",
            ]
        )
    }

    @Test func answersServerPingsAndWebSocketPings() throws {
        let rig = try Rig()
        try rig.connectAndAck()
        try rig.serverSends(#"{"type":"ping","payload":{"n":42}}"#)
        try rig.serverSends(.ping, ByteBuffer(string: "are-you-there"))
        #expect(try rig.sent() == [#"{"type":"pong","payload":{"n":42}}"#, "pong are-you-there"])
    }

    @Test func aMalformedFrameCloses4400AndTheNextConnectionResubscribes() throws {
        let rig = try Rig()
        let id = rig.subscribe("s")
        try rig.connectAndAck()
        _ = try rig.sent()
        try rig.serverSends("{not json")
        #expect(try rig.sent() == ["close 4400"])
        #expect(rig.recorder.states("s").last == .reconnecting)
        // The peer never answers our close: the handshake's timeout closes the connection,
        // and the backoff (100 ms, no jitter) starts the next.
        rig.advance(.seconds(1))
        #expect(rig.channels.count == 2)
        try rig.serverSends(#"{"type":"connection_ack"}"#)
        #expect(try rig.sent() == [#"{"type":"connection_init"}"#, #"{"type":"subscribe","id":"\#(id)","payload":{"query":"subscription { tick }"}}"#])
        #expect(rig.recorder.states("s") == [.pending, .active, .reconnecting, .active])
        // A binary frame is a violation too.
        try rig.serverSends(.binary, ByteBuffer(bytes: [1, 2, 3]))
        #expect(try rig.sent() == ["close 4400"])
    }

    @Test func noAckWithinTheAckTimeoutCloses4408AndRetries() throws {
        let rig = try Rig { $0.transport.ackTimeout = .milliseconds(200) }
        rig.start()
        #expect(try rig.sent() == [#"{"type":"connection_init"}"#])
        rig.advance(.milliseconds(199))
        #expect(try rig.sent() == [])
        rig.advance(.milliseconds(1))
        #expect(try rig.sent() == ["close 4408"])
        // The backoff: 100 ms, no jitter.
        rig.advance(.milliseconds(99))
        #expect(rig.channels.count == 1)
        rig.advance(.milliseconds(1))
        #expect(rig.channels.count == 2, "a second attempt after the backoff")
        try rig.serverSends(#"{"type":"connection_ack"}"#)
        #expect(rig.recorder.connectionStates.last == .connected)
    }

    @Test func aSilentPeerIsDeclaredDeadAfterPingIntervalAndPongTimeout() throws {
        let rig = try Rig {
            $0.transport.pingInterval = .milliseconds(200)
            $0.transport.pongTimeout = .milliseconds(300)
        }
        rig.subscribe("s")
        try rig.connectAndAck()
        _ = try rig.sent()
        // The client pings every ping_interval.
        rig.advance(.milliseconds(199))
        #expect(try rig.sent() == [])
        rig.advance(.milliseconds(1))
        #expect(try rig.sent() == [#"{"type":"ping"}"#])
        #expect(rig.channel.isActive)
        rig.advance(.milliseconds(299))
        #expect(rig.channel.isActive)
        rig.advance(.milliseconds(1))
        #expect(!rig.channel.isActive, "aborted when no pong came within pong_timeout")
        #expect(rig.recorder.states("s").last == .reconnecting)
    }

    @Test func aMutationInFlightWhenTheConnectionDropsFailsAndIsNeverSentAgain() throws {
        let rig = try Rig()
        let subscription = rig.subscribe("s")
        try rig.connectAndAck()
        rig.subscribe("m", kind: .mutation)
        #expect(try rig.sent().count == 2)
        try rig.channel.close().wait()
        rig.loop.run()
        #expect(rig.recorder.finish("m") == .error(.transport(.connectionLost(reason: "upstream connection lost; the operation was not retried"))))
        #expect(rig.recorder.states("s").last == .reconnecting)
        rig.advance(.milliseconds(100))
        try rig.serverSends(#"{"type":"connection_ack"}"#)
        #expect(
            try rig.sent() == [#"{"type":"connection_init"}"#, #"{"type":"subscribe","id":"\#(subscription)","payload":{"query":"subscription { tick }"}}"#],
            "the subscription is sent again, the mutation is not"
        )
        #expect(rig.recorder.states("s").last == .active)
    }

    @Test(arguments: [UInt16(4401), 4403, 4406])
    func aFatalCloseCodeFailsWithoutAnotherConnect(code: UInt16) throws {
        let rig = try Rig()
        rig.subscribe("s")
        try rig.connectAndAck()
        var data = ByteBuffer()
        data.writeInteger(code)
        data.writeString("nope")
        try rig.serverSends(.connectionClose, data)
        guard case .error(.transport(.upstreamClosed(_, code, "nope"))) = rig.recorder.finish("s") else {
            Issue.record("unexpected finish \(String(describing: rig.recorder.finish("s")))")
            return
        }
        #expect(rig.transport.connectionStateOnLoop == .failed(closeCode: CloseCode(code), reason: "nope"))
        rig.advance(.seconds(60))
        #expect(rig.channels.count == 1, "never connected again")
    }
}
