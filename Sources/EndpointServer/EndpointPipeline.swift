import GQLMuxVocabulary
import Handover
import LocalEndpoint
import NIOCore
import NIOHTTP1
import NIOWebSocket
import RequestValidation

/// Why a carried connection cannot be rebuilt by the endpoint.
package struct EndpointPipelineError: Error, CustomStringConvertible {
    package var description: String
}

/// The one place an endpoint connection's pipeline is built, accepted now or carried over a
/// restart, so both have the same handlers in the same order and the same duties:
///
///     accepted ──▶ EncodedFrameWriter, HTTPActivity, NIO's HTTP server codec with the
///         WebSocket upgrader, EndpointHTTPHandler (a session joins at the first request)
///     accepted ──upgrade──▶ the HTTP handlers go; the WebSocket handlers below come
///     carried WebSocket ──▶ NIO's frame codec, then the WebSocket handlers: EncodedFrameWriter,
///         WebSocketInboundMeter, NIOWebSocketFrameAggregator, EndpointWebSocketHandler, session
///     carried stream ──▶ EncodedFrameWriter, ResumedChunkedResponse (the head went out before),
///         EndpointHTTPHandler resumed in its stream, session
///
/// Each session is told which handler owns its wire (``EndpointSession/wire``), which is what
/// the online restart asks; the daemon names no handler or codec type.
package enum EndpointPipeline {
    /// Builds `channel`'s handlers, on its loop. Returns the session of a carried connection
    /// (its subscriptions are the caller's to resume); nil for an accepted one, whose session
    /// comes with its first request or upgrade.
    @discardableResult
    package static func configure<Host: EndpointConnectionHost>(
        _ channel: any Channel,
        origin: ClientOrigin,
        arrival: ConnectionArrival,
        host: Host
    ) throws -> Host.Session? {
        switch arrival {
        case .accepted:
            try accept(channel, origin: origin, host: host)
            return nil
        case .carried(let record):
            switch record.kind {
            case .transportWS, .legacyWS:
                // What NIO's upgrader puts in front of a WebSocket after its upgrade.
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(WebSocketFrameEncoder())
                try sync.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: host.maxMessageBytes)))
                try sync.addHandler(WebSocketProtocolErrorHandler())
                return try addWebSocketHandlers(
                    channel,
                    wire: record.kind == .legacyWS ? .legacyWS : .transportWS,
                    token: nil,
                    origin: origin,
                    reservation: host.makeInboundBudget(),
                    acknowledged: record.acknowledged,
                    upstream: record.upstream,
                    host: host
                )
            case .sse, .multipart:
                // The stream's head went out before the restart; its body goes on.
                guard let id = record.subscriptions.first?.id,
                    let exchange = HTTPExchange(resuming: record.kind == .sse ? .sse : .multipart, id: id)
                else { throw EndpointPipelineError(description: "a carried HTTP stream without its subscription") }
                let sync = channel.pipeline.syncOperations
                let writer = EncodedFrameWriter()
                let http = httpHandler(origin: origin, reservation: host.makeInboundBudget(), writer: writer, host: host)
                let session = host.endpointSession(channel, origin: origin, wire: .http)
                http.resume(exchange, session: session)
                try sync.addHandler(writer)
                try sync.addHandler(ResumedChunkedResponse())
                try sync.addHandler(http)
                try sync.addHandler(session)
                return session
            case .line:
                throw EndpointPipelineError(description: "a line-protocol client is not the endpoint's")
            }
        }
    }

    private static func httpHandler(
        origin: ClientOrigin,
        reservation: any InboundBudget,
        writer: EncodedFrameWriter,
        host: any EndpointConnectionHost
    ) -> EndpointHTTPHandler {
        EndpointHTTPHandler(
            path: host.endpointPath,
            maxBodyBytes: host.maxMessageBytes,
            listener: origin,
            host: host,
            reservation: reservation,
            writer: writer,
            makeSession: { channel in host.endpointSession(channel, origin: origin, wire: .http) }
        )
    }

    /// An accepted connection: HTTP, with the WebSocket upgrade.
    private static func accept(_ channel: any Channel, origin: ClientOrigin, host: any EndpointConnectionHost) throws {
        let sync = channel.pipeline.syncOperations
        let path = host.endpointPath
        let reservation = host.makeInboundBudget()
        let writer = EncodedFrameWriter()
        let http = httpHandler(origin: origin, reservation: reservation, writer: writer, host: host)
        let activity = HTTPActivity(http: http)
        let bound = NIOLoopBound((http, activity, writer, reservation, host), eventLoop: channel.eventLoop)
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: host.maxMessageBytes,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                // A refused upgrade goes on as a plain request: the HTTP handler answers it
                // (403, 401) and logs why.
                let host = bound.value.4
                guard host.upstream(target: target(head.uri), path: path) != nil, let wire = subprotocol(head), mayUpgrade(head, origin: origin, host: host)
                else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                var headers = HTTPHeaders()
                if !head.headers["Sec-WebSocket-Protocol"].isEmpty { headers.add(name: "Sec-WebSocket-Protocol", value: wire.rawValue) }
                return channel.eventLoop.makeSucceededFuture(headers)
            },
            upgradePipelineHandler: { channel, head in
                let wire = subprotocol(head) ?? .transportWS
                let (http, _, _, _, host) = bound.value
                let token = tokenAfterUpgrade(head, origin: origin, host: host)
                let upstream = host.upstream(target: target(head.uri), path: path) ?? nil
                let headers = host.presentedHeaders(head.headers)
                let removed = channel.eventLoop.makePromise(of: Void.self)
                channel.pipeline.syncOperations.removeHandler(http, promise: removed)
                return removed.futureResult.flatMapThrowing {
                    let (_, activity, writer, reservation, host) = bound.value
                    channel.pipeline.syncOperations.removeHandler(activity, promise: nil)
                    channel.pipeline.syncOperations.removeHandler(writer, promise: nil)
                    let session = try addWebSocketHandlers(
                        channel,
                        wire: wire,
                        token: token,
                        origin: origin,
                        reservation: reservation,
                        upstream: upstream,
                        host: host
                    )
                    session.present(PresentedCredential(headers: headers))
                }
            }
        )
        try sync.addHandler(writer)
        try sync.addHandler(activity)
        try sync.configureHTTPServerPipeline(
            withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }),
            withErrorHandling: true
        )
        try sync.addHandler(http)
    }

    /// An endpoint WebSocket client's handlers, its session last: after its upgrade, or carried
    /// over a restart (`acknowledged`: its `connection_init` was answered before).
    private static func addWebSocketHandlers<Host: EndpointConnectionHost>(
        _ channel: any Channel,
        wire: WireProtocol,
        token: EndpointToken?,
        origin: ClientOrigin,
        reservation: any InboundBudget,
        acknowledged: Bool = false,
        upstream: String? = nil,
        host: Host
    ) throws -> Host.Session {
        let sync = channel.pipeline.syncOperations
        // Frames out are encoded by EndpointWebSocketHandler, a batch at a time, and written
        // below NIO's frame encoder.
        let writer = EncodedFrameWriter()
        try sync.addHandler(writer, position: .first)
        let meter = WebSocketInboundMeter(reservation: reservation) {
            var reason = ByteBuffer()
            reason.writeInteger(UInt16(1008))
            reason.writeString("gqlmuxd's memory budget (total_buffer_bytes) cannot hold this message")
            writer.write(EndpointWebSocketHandler.frame(.connectionClose, reason), flush: true, promise: nil)
            channel.close(promise: nil)
        }
        try sync.addHandler(WebSocketInboundMeter.RawBytes(meter), position: .first)
        try sync.addHandler(WebSocketInboundMeter.Frames(meter))
        try sync.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0,
                maxAccumulatedFrameCount: 1 << 12,
                maxAccumulatedFrameSize: host.maxMessageBytes
            )
        )
        let session = host.endpointSession(channel, origin: origin, wire: .webSocket)
        let handler = EndpointWebSocketHandler(
            wire: wire,
            writer: writer,
            token: token,
            acknowledged: acknowledged,
            upstream: upstream,
            documentLimits: { host.documentLimits },
            onInit: { [unowned session] payload in session.presentPayload(payload.map { Array($0.readableBytesView) }) }
        ) {
            host.endpointRefused(
                .unauthorized,
                listener: origin,
                fields: ["GQLMUX_REASON": "connection_init_token"],
                message: "WebSocket client without a valid token closed (4403)"
            )
        }
        try sync.addHandler(handler)
        session.framing = .webSocket(wire)  // results framed once, by the fan-out
        session.inbound = reservation
        session.wire = handler
        try sync.addHandler(session)
        return session
    }

    /// Whether an upgrade passes the browser checks and carries no wrong token (a missing one
    /// may still come in `connection_init`).
    private static func mayUpgrade(_ head: HTTPRequestHead, origin: ClientOrigin, host: any EndpointHost) -> Bool {
        guard case .allow = host.endpointAccess.check(EndpointHTTPHandler.accessHeaders(head)) else { return false }
        guard origin == .endpointTCP, let token = host.endpointToken else { return true }
        return token.check(authorization: head.headers["authorization"]) != .invalid
    }

    /// The token a WebSocket client must still present in `connection_init`: on the TCP port,
    /// when one is configured and the upgrade did not carry it.
    private static func tokenAfterUpgrade(_ head: HTTPRequestHead, origin: ClientOrigin, host: any EndpointHost) -> EndpointToken? {
        guard origin == .endpointTCP, let token = host.endpointToken else { return nil }
        return token.check(authorization: head.headers["authorization"]) == .valid ? nil : token
    }

    private static func target(_ uri: String) -> Substring {
        uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }

    /// The subprotocol for an upgrade request: the client's first supported offer;
    /// graphql-transport-ws when it offers none; nil when it offers only others.
    private static func subprotocol(_ head: HTTPRequestHead) -> WireProtocol? {
        let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",").map(String.init) }
        return offered.isEmpty ? .transportWS : WireProtocol.select(offered: offered)
    }
}
