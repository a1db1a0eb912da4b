import GraphQLTransportWS
import JSONEnvelope
import LocalEndpoint
import NIOCore
import NIOHTTP1
import RequestValidation

/// GraphQL over HTTP on the endpoint, in front of the connection's ``ClientSession`` (added at
/// the first request): each request becomes one local `subscribe`, its answer a JSON response
/// or a stream (``HTTPExchange`` decides). NIO's server pipeline hands over a pipelined request
/// only after the answer before it has ended, so one exchange runs at a time; a stream ends its
/// connection.
///
/// Not `Sendable`: NIO calls it on its channel's loop, and the heartbeat timer reaches it
/// through a `NIOLoopBound`, checked on that loop.
final class EndpointHTTPHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = HTTPServerResponsePart

    private let path: String
    private let maxBodyBytes: Int
    private let documentLimits: SubscribeRequest.Limits
    private let makeSession: (any Channel) -> ClientSession
    private var session: ClientSession?
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var tooLarge = false
    private var exchange: HTTPExchange?
    private var heartbeat: RepeatedTask?
    private var requests = 0

    init(path: String, maxBodyBytes: Int, documentLimits: SubscribeRequest.Limits, makeSession: @escaping (any Channel) -> ClientSession) {
        self.path = path
        self.maxBodyBytes = maxBodyBytes
        self.documentLimits = documentLimits
        self.makeSession = makeSession
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
            tooLarge = false
        case .body(var part):
            guard !tooLarge else { return }
            if (body?.readableBytes ?? 0) + part.readableBytes > maxBodyBytes {
                tooLarge = true
                body = nil
                return
            }
            if body == nil { body = part } else { body!.writeBuffer(&part) }
        case .end:
            guard let head else { return }
            self.head = nil
            request(head, context: context)
        }
    }

    private func request(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        // NIO's HTTPServerPipelineHandler holds a pipelined request until the answer before it
        // ended; a request during a stream (which ends its connection) cannot be answered.
        guard exchange == nil else { return context.close(promise: nil) }
        let target = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard target.first.map(String.init) == path else { return reject(404, "the GraphQL endpoint is \(path)", context: context) }
        guard !tooLarge else { return reject(413, "the request is larger than max_line_bytes (\(maxBodyBytes))", context: context, close: true) }
        requests += 1
        let limits = documentLimits
        let start = HTTPExchange.start(
            method: head.method.rawValue,
            accept: head.headers["accept"].joined(separator: ","),
            contentType: head.headers.first(name: "content-type"),
            body: body,
            queryItems: target.count > 1 ? HTTPExchange.queryItems(target[1]) : [],
            id: "http-\(requests)"
        ) { request in
            guard let parsed = try? SubscribeRequest.parse(request, limits: limits) else { return (false, false) }
            return (parsed.kind == .mutation, parsed.kind == .subscription)
        }
        switch start {
        case .reject(let status, let message):
            reject(status, message, context: context)
        case .subscribe(let line, var exchange):
            let opening = exchange.opening()
            self.exchange = exchange
            write(opening, context: context)
            if let beat = exchange.heartbeat {
                let interval: TimeAmount = exchange.mode == .multipart ? .seconds(5) : .seconds(12)
                let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
                heartbeat = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                    let (context, handler) = bound.value
                    context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(beat))), promise: nil)
                }
            }
            context.flush()
            if session == nil {
                let session = makeSession(context.channel)
                self.session = session
                do {
                    try context.pipeline.syncOperations.addHandler(session, position: .after(self))
                } catch {
                    context.close(promise: nil)
                    return
                }
            }
            context.fireChannelRead(wrapInboundOut(line))
        }
    }

    /// The session's lines: the current exchange's answer.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard var exchange else {
            promise?.succeed()
            return
        }
        let outputs = exchange.fromSession(unwrapOutboundIn(data))
        self.exchange = exchange.ended ? nil : exchange
        if exchange.ended {
            heartbeat?.cancel()
            heartbeat = nil
        }
        let streaming = exchange.mode == .sse || exchange.mode == .multipart
        write(outputs, context: context)
        promise?.succeed()
        if exchange.ended, streaming {
            context.flush()
            context.close(promise: nil)
        }
    }

    private func write(_ outputs: [HTTPExchange.Output], context: ChannelHandlerContext) {
        for (index, output) in outputs.enumerated() {
            switch output {
            case .head(let status, let contentType):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: contentType)
                // A whole answer at once (JSON): its length is known.
                if index + 2 < outputs.count, case .body(let body) = outputs[index + 1], outputs[index + 2] == .end {
                    headers.add(name: "Content-Length", value: "\(body.readableBytes)")
                }
                if contentType == "text/event-stream" {
                    headers.add(name: "Cache-Control", value: "no-cache")
                    headers.add(name: "Connection", value: "close")
                } else if contentType.hasPrefix("multipart/") {
                    headers.add(name: "Connection", value: "close")
                }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
            case .body(let bytes):
                context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
            case .end:
                context.write(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
        if !outputs.isEmpty { context.flush() }
    }

    private func reject(_ status: Int, _ message: String, context: ChannelHandlerContext, close: Bool = false) {
        var writer = JSONObjectWriter()
        writer.field("message", message)
        var body = ByteBuffer(string: #"{"errors":["#)
        var error = writer.finish()
        body.writeBuffer(&error)
        body.writeString("]}")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        if close { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if close {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        heartbeat?.cancel()
        heartbeat = nil
        context.fireChannelInactive()
    }
}
