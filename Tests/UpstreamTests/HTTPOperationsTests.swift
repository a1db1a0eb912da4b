import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import Upstream

/// What an `http_url` answer becomes: a GraphQL response (any status) is the result; anything
/// else ends the operation with the contract's CONNECTION_LOST, naming the status.
@Suite struct HTTPOperationsTests {
    let url = try! HTTPURL("http://127.0.0.1:8080/graphql")

    @Test func aGraphQLResponseIsTheResultWhateverTheStatus() {
        for status in [HTTPResponseStatus.ok, .badRequest] {
            let body = ByteBuffer(string: #"{"errors":[{"message":"Cannot query field"}]}"#)
            #expect(HTTPOperations.updates(for: HTTPResponse(status: status, body: body), url: url) == [.next(body), .finished(.completed)])
        }
    }

    @Test func anythingElseIsAConnectionLostNamingTheStatus() {
        for body in ["<html>Bad Gateway</html>", "", #"[{"data":1}]"#, "{\"a\":\"\u{FFFD}\"} trailing"] {
            let updates = HTTPOperations.updates(for: HTTPResponse(status: .badGateway, body: ByteBuffer(string: body)), url: url)
            guard case .finished(.error(.transport(.connectionLost(let reason)))) = updates.first, updates.count == 1 else {
                Issue.record("\(body): \(updates)")
                continue
            }
            #expect(reason.hasPrefix("HTTP 502 Bad Gateway from http://127.0.0.1:8080/graphql"))
        }
    }
}

/// A flood of queries over `http_url` holds at most `maxInFlight` connections; the rest wait
/// their turn and start as places free up.
@Suite struct HTTPOperationsLimitTests {
    /// Accepts connections and never answers; counts them.
    final class SilentHTTPServer: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let accepted = NIOLockedValueBox(0)
        func channelActive(context: ChannelHandlerContext) {
            accepted.withLockedValue { $0 += 1 }
            context.fireChannelActive()
        }
    }

    @Test func atMostMaxInFlightConnectionsAtOnce() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = SilentHTTPServer()
        let listener = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(server) } }
            .bind(host: "127.0.0.1", port: 0).get()
        let url = try HTTPURL("http://127.0.0.1:\(listener.localAddress!.port!)/graphql")
        let loop = group.next()
        let http = try HTTPOperations(configuration: .init(url: url, timeout: .seconds(30)), eventLoop: loop)
        let ids = try await loop.submit {
            (0..<(HTTPOperations.maxInFlight + 10)).map { _ in
                http.sendOnLoop(payload: ByteBuffer(string: #"{"query":"{ hello }"}"#)) { _ in }
            }
        }.get()
        await eventually("maxInFlight connections") { server.accepted.withLockedValue { $0 } == HTTPOperations.maxInFlight }
        // Freeing one place starts the oldest waiting request.
        try await loop.submit { http.cancelOnLoop(id: ids[0]) }.get()
        await eventually("one more connection") { server.accepted.withLockedValue { $0 } == HTTPOperations.maxInFlight + 1 }
        try await loop.submit { http.shutdownOnLoop() }.get()
        try await listener.close()
        try await group.shutdownGracefully()
    }
}
