import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import Upstream

/// Kept-alive `http_url` connections over real sockets, against a server that answers the first
/// request of each connection and closes the connection when a second one arrives on it (as a
/// server that times out an idle connection just as a request comes).
@Suite struct HTTPKeepAliveTests {
    /// What the server saw: requests (their bodies) and connections accepted.
    final class Seen: Sendable {
        let requests = NIOLockedValueBox<[String]>([])
        let connections = NIOLockedValueBox(0)
    }

    /// One per connection: answers its first request, closes on the second.
    final class OneAnswerPerConnection: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let seen: Seen
        var answered = false

        init(_ seen: Seen) { self.seen = seen }

        func channelActive(context: ChannelHandlerContext) {
            seen.connections.withLockedValue { $0 += 1 }
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .body(let body) = unwrapInboundIn(data) else { return }
            seen.requests.withLockedValue { $0.append(String(buffer: body)) }
            guard !answered else {
                context.close(promise: nil)  // the second request on this connection: no answer
                return
            }
            answered = true
            let answer = ByteBuffer(string: #"{"data":{"n":1}}"#)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(answer.readableBytes)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(answer))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    @Test func aQueryIsSentAgainOnANewConnectionAMutationNever() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = Seen()
        let listener = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(OneAnswerPerConnection(server))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let url = try HTTPURL("http://127.0.0.1:\(listener.localAddress!.port!)/graphql")
        let loop = group.next()
        let http = try HTTPOperations(configuration: .init(url: url, timeout: .seconds(10)), eventLoop: loop)
        let results = NIOLockedValueBox<[Int: [OperationUpdate]]>([:])
        http.updates = { id, update in results.withLockedValue { $0[Int(id.description)!, default: []].append(update) } }
        func send(_ n: Int, _ kind: OperationKind, _ query: String) async throws {
            try await loop.submit { http.sendOnLoop(OperationID(n), kind: kind, payload: ByteBuffer(string: query)) }.get()
            await eventually("operation \(n) ended") {
                results.withLockedValue { $0[n]?.contains { if case .finished = $0 { true } else { false } } == true }
            }
        }
        try await send(1, .query, "q1")
        #expect(server.connections.withLockedValue { $0 } == 1)
        // Reuses the idle connection, which the server closes: sent again on a new one.
        try await send(2, .query, "q2")
        #expect(results.withLockedValue { $0[2] } == [.next(ByteBuffer(string: #"{"data":{"n":1}}"#)), .finished(.completed)])
        #expect(server.requests.withLockedValue { $0 } == ["q1", "q2", "q2"])
        #expect(server.connections.withLockedValue { $0 } == 2)
        // A mutation in the same place is not sent again: it may have run.
        try await send(3, .mutation, "m3")
        guard case .finished(.error(.transport(.connectionLost(let reason))))? = results.withLockedValue({ $0[3]?.last }) else {
            Issue.record("mutation: \(String(describing: results.withLockedValue { $0[3] }))")
            return
        }
        #expect(reason.contains("not retried"))
        #expect(server.requests.withLockedValue { $0 } == ["q1", "q2", "q2", "m3"])
        #expect(server.connections.withLockedValue { $0 } == 2)
        #expect(try await loop.submit { http.connectionsOpenedOnLoop }.get() == 2)
        try await loop.submit { http.shutdownOnLoop() }.get()
        try await listener.close()
        try await group.shutdownGracefully()
    }
}
