import GraphQLTransportWS
import NIOCore
import NIOHTTP1
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

    @Test func httpURLsAreParsedLikeWebSocketURLs() throws {
        #expect(try HTTPURL("https://[::1]/g?x=1").description == "https://[::1]/g?x=1")
        #expect(throws: UpstreamURLError.self) { try HTTPURL("ws://h/g") }
        #expect(throws: UpstreamURLError.self) { try HTTPURL("http://h:0/g") }
    }
}
