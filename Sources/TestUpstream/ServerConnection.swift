import Foundation
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOWebSocket

/// One graphql-transport-ws connection of the test upstream; lives on the server's loop.
/// `@unchecked Sendable` — safe because NIO calls it only there and the server reaches it there.
final class ServerConnection: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private unowned let server: TestUpstreamServer
    let channel: any Channel
    private var acknowledged = false
    private var subscriptions: Set<String> = []
    private var closing = false

    init(server: TestUpstreamServer, channel: any Channel) {
        self.server = server
        self.channel = channel
    }

    func handlerAdded(context: ChannelHandlerContext) {
        server.connections.append(self)
        server.stats.connections += 1
        server.stats.openConnections += 1
    }

    func channelInactive(context: ChannelHandlerContext) {
        server.connections.removeAll { $0 === self }
        server.stats.openConnections -= 1
        server.stats.activeSubscriptions -= subscriptions.count
        subscriptions.removeAll()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if server.silent { return }
        switch frame.opcode {
        case .ping:
            sendFrame(.pong, frame.unmaskedData)
        case .pong:
            server.stats.webSocketPongs.append(String(buffer: frame.unmaskedData))
        case .connectionClose:
            var data = frame.unmaskedData
            if let code = data.readInteger(as: UInt16.self) { server.stats.clientCloseCodes.append(code) }
            if !closing { close(code: 1000, reason: "") }
        case .text:
            handle(frame.unmaskedData)
        default:
            close(code: 4400, reason: "binary frames are not supported")
        }
    }

    private func handle(_ text: ByteBuffer) {
        guard let envelope = try? Envelope(text) else {
            close(code: 4400, reason: "Invalid message received")
            return
        }
        let payload = envelope.payload.map { String(buffer: $0) }
        switch envelope.type {
        case "connection_init":
            server.stats.connectionInits += 1
            server.stats.lastInitPayload = payload ?? ""
            if let token = server.options.requiredToken, !(payload ?? "").contains(#""token":"\#(token)""#) {
                close(code: 4403, reason: "Forbidden")
                return
            }
            if server.options.sendAck {
                acknowledged = true
                sendText(#"{"type":"connection_ack"}"#)
                if let code = server.options.closeAfterAck { close(code: code, reason: "flapping") }
            }
        case "ping":
            server.stats.pingsReceived += 1
            sendText(#"{"type":"pong"}"#)
        case "pong":
            server.stats.pongPayloads.append(payload ?? "")
        case "subscribe":
            guard acknowledged, let id = envelope.id, let payload else {
                close(code: 4401, reason: "Unauthorized")
                return
            }
            subscribe(id: id, request: payload)
        case "complete":
            server.stats.completesReceived += 1
            if let id = envelope.id, subscriptions.remove(id) != nil { server.stats.activeSubscriptions -= 1 }
        default:
            close(code: 4400, reason: "Invalid message received")
        }
    }

    private func subscribe(id: String, request: String) {
        server.stats.subscribes += 1
        server.stats.lastSubscribePayload = request
        if request.contains("SYNTAX_ERROR") {
            close(code: 4400, reason: "Syntax Error: Unexpected Name")
            return
        }
        if request.contains("POISON_1007") {  // a request the server cannot stomach: the whole connection goes
            close(code: 1007, reason: "Invalid frame payload data")
            return
        }
        // JSON as any client writes it (gql puts a space after each colon).
        let document = request.replacingOccurrences(of: #"\n"#, with: " ").replacingOccurrences(of: #"": ""#, with: #"":""#)
        let isSubscription = document.contains(#""query":"subscription"#) || document.contains(#""query":" subscription"#)
        let isMutation = document.contains(#""query":"mutation"#)
        if isSubscription {
            server.stats.subscriptionSubscribes += 1
            if subscriptions.insert(id).inserted { server.stats.activeSubscriptions += 1 }
            return
        }
        if isMutation {
            server.stats.mutations += 1
        } else {
            server.stats.queries += 1
        }
        if request.contains("hold") { return }
        let data = isMutation ? #"{"data":{"increment":\#(server.stats.mutations)}}"# : #"{"data":{"hello":"world"}}"#
        sendText(#"{"type":"next","id":\#(jsonString(id)),"payload":\#(data)}"#)
        sendText(#"{"type":"complete","id":\#(jsonString(id))}"#)
    }

    /// Appends tick `n`'s frame for every subscription to `out`, already encoded (unmasked text
    /// frames, RFC 6455 5.2), for ``writeEncoded(_:)``; returns how many.
    func encodeTick(_ n: Int, padding: Int, into out: inout ByteBuffer) -> Int {
        let pad = padding > 0 ? Self.padding(padding) : ""
        for id in subscriptions {
            scratch.clear()
            scratch.writeStaticString(#"{"type":"next","id":"#)
            scratch.writeString(jsonString(id))
            scratch.writeStaticString(#","payload":{"data":{"tick":"#)
            scratch.writeString(String(n))
            scratch.writeString(pad)
            scratch.writeStaticString("}}}")
            out.writeInteger(UInt8(0x81))
            if scratch.readableBytes < 126 {
                out.writeInteger(UInt8(scratch.readableBytes))
            } else if scratch.readableBytes <= Int(UInt16.max) {
                out.writeInteger(UInt8(126))
                out.writeInteger(UInt16(scratch.readableBytes))
            } else {
                out.writeInteger(UInt8(127))
                out.writeInteger(UInt64(scratch.readableBytes))
            }
            out.writeImmutableBuffer(scratch)
        }
        return subscriptions.count
    }

    private var scratch = ByteBuffer()

    /// Writes frames encoded by ``encodeTick(_:padding:into:)`` below NIO's frame encoder, as
    /// one buffer: the benchmark's upstream costs less than the daemon it feeds (a frame per
    /// write took a quarter of a core at 100,000 messages a second).
    func writeEncoded(_ bytes: ByteBuffer) {
        if encoderContext == nil { encoderContext = try? channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self) }
        guard let encoderContext else { preconditionFailure("the test upstream's WebSocket pipeline has no frame encoder") }
        encoderContext.write(NIOAny(bytes), promise: nil)
    }

    private var encoderContext: ChannelHandlerContext?

    /// Sends tick `n` to every subscription; with `flush` false the frames wait for `flush()`.
    func tick(_ n: Int, padding: Int = 0, flush: Bool = true) -> Int {
        var frames = ByteBuffer()
        let sent = encodeTick(n, padding: padding, into: &frames)
        writeEncoded(frames)
        if flush { channel.flush() }
        return sent
    }

    func flush() { channel.flush() }

    nonisolated(unsafe) private static var paddings: [Int: String] = [:]
    private static func padding(_ size: Int) -> String {
        if let cached = paddings[size] { return cached }
        let pad = #","pad":"\#(String(repeating: "x", count: size))""#
        paddings[size] = pad
        return pad
    }

    func completeAll() {
        for id in subscriptions { sendText(#"{"type":"complete","id":\#(jsonString(id))}"#) }
        server.stats.activeSubscriptions -= subscriptions.count
        subscriptions.removeAll()
    }

    func sendText(_ text: String) {
        sendFrame(.text, ByteBuffer(string: text))
    }

    func sendFrame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) {
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: opcode, data: data), promise: nil)
    }

    func close(code: UInt16, reason: String) {
        guard !closing else { return }
        closing = true
        var data = ByteBuffer()
        data.writeInteger(code)
        data.writeString(reason)
        let channel = self.channel
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
