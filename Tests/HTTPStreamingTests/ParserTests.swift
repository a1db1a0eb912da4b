import GQLMuxTestSupport
import NIOCore
import Testing

@testable import HTTPStreaming

/// Streams as real servers send them (bytes captured on loopback), read whole and in every
/// kind of split.
enum Recorded {
    /// strawberry 0.341.2: no opening delimiter, headers in every part, a `{}` heartbeat first,
    /// the close delimiter after an empty part.
    static let strawberry =
        "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}\r\n--graphql"
        + "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 32\r\n\r\n{\"payload\":{\"data\":{\"count\":1}}}\r\n--graphql"
        + "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}\r\n--graphql"
        + "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 32\r\n\r\n{\"payload\":{\"data\":{\"count\":2}}}\r\n--graphql"
        + "\r\n--graphql--\r\n"

    /// Apollo Router: a leading delimiter, lower-case headers, each chunk carries the next
    /// delimiter, a boundary string inside a JSON string, a fatal error, the close delimiter.
    static let router =
        "\r\n--graphql\r\ncontent-type: application/json\r\n\r\n{}\r\n--graphql"
        + "\r\ncontent-type: application/json\r\n\r\n{\"payload\":{\"data\":{\"text\":\"a --graphql b\"}}}\r\n--graphql"
        + "\r\ncontent-type: application/json\r\n\r\n{\"payload\":null}\r\n--graphql"
        + "\r\ncontent-type: application/json\r\n\r\n{\"payload\":null,\"errors\":[{\"message\":\"gone\"}]}\r\n--graphql--\r\n"

    /// async-graphql: a preamble line, the delimiter before each part, bare results.
    static let asyncGraphQL =
        "preamble to ignore\r\n--graphql\r\nContent-Type: application/json\r\n\r\n{\"data\":{\"n\":1}}\r\n"
        + "--graphql\r\nContent-Type: application/json\r\n\r\n{\"data\":{\"n\":2}}\r\n--graphql--\r\n"

    /// strawberry's SSE: CRLF lines, a `: ping` keep-alive, `next` then `complete`.
    static let sseStrawberry =
        ": ping\r\n\r\nevent: next\r\ndata: {\"data\":{\"count\":1}}\r\n\r\n: ping\r\n\r\n"
        + "event: next\r\ndata: {\"data\":{\"count\":2}}\r\n\r\nevent: complete\r\ndata: \r\n\r\n"

    /// The graphql-sse reference: LF lines, bare `:` keep-alives, data over two lines.
    static let sseReference =
        ":\n\nevent: next\ndata: {\"data\":\ndata: {\"count\":1}}\n\n:\n\nevent: next\ndata: {\"data\":{\"count\":2}}\n\nevent: complete\ndata:\n\n"
}

func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

func text(_ events: [MultipartEvent]) -> [String] {
    events.map {
        switch $0 {
        case .part(let body): String(buffer: body)
        case .end: "<end>"
        }
    }
}

/// Feeds `bytes` in pieces cut at `cuts`.
func feedMultipart(_ bytes: String, boundary: String = "graphql", cuts: [Int]) throws -> [String] {
    var parser = MultipartParser(boundary: boundary, maxPartBytes: 1 << 20)
    let all = Array(bytes.utf8)
    var events: [MultipartEvent] = []
    var start = 0
    for cut in cuts.sorted() + [all.count] where cut >= start {
        events += try parser.feed(ByteBuffer(bytes: all[start..<cut]))
        start = cut
    }
    return text(events)
}

func feedSSE(_ bytes: String, cuts: [Int]) throws -> [SSEEvent] {
    var parser = SSEParser(maxEventBytes: 1 << 20)
    let all = Array(bytes.utf8)
    var events: [SSEEvent] = []
    var start = 0
    for cut in cuts.sorted() + [all.count] where cut >= start {
        events += try parser.feed(ByteBuffer(bytes: all[start..<cut]))
        start = cut
    }
    return events
}

/// Random cut points: some streams split into single bytes, some into a few large chunks.
func randomCuts(count: Int, using random: inout SplitMix64) -> [Int] {
    let pieces = Int.random(in: 0...min(count, Bool.random(using: &random) ? 8 : count), using: &random)
    return (0..<pieces).map { _ in Int.random(in: 0...count, using: &random) }
}

@Suite struct MultipartParserTests {
    @Test func strawberrysStreamWithoutAnOpeningDelimiter() throws {
        #expect(
            try feedMultipart(Recorded.strawberry, cuts: []) == [
                "{}", #"{"payload":{"data":{"count":1}}}"#, "{}", #"{"payload":{"data":{"count":2}}}"#, "<end>",
            ]
        )
    }

    @Test func routersStreamWithTheBoundaryInsideAString() throws {
        #expect(
            try feedMultipart(Recorded.router, cuts: []) == [
                "{}", #"{"payload":{"data":{"text":"a --graphql b"}}}"#, #"{"payload":null}"#,
                #"{"payload":null,"errors":[{"message":"gone"}]}"#, "<end>",
            ]
        )
    }

    @Test func asyncGraphQLsPreambleIsIgnored() throws {
        #expect(try feedMultipart(Recorded.asyncGraphQL, cuts: []) == [#"{"data":{"n":1}}"#, #"{"data":{"n":2}}"#, "<end>"])
    }

    @Test(arguments: [Recorded.strawberry, Recorded.router, Recorded.asyncGraphQL])
    func anySplitYieldsTheSameEvents(stream: String) throws {
        let whole = try feedMultipart(stream, cuts: [])
        var random = SplitMix64(seed: 0x6d75_6c74)
        for _ in 0..<2_000 {
            let cuts = randomCuts(count: stream.utf8.count, using: &random)
            let split = try feedMultipart(stream, cuts: cuts)
            #expect(split == whole, "cuts \(cuts.sorted())")
            if split != whole { return }
        }
        // Every single-byte split too.
        #expect(try feedMultipart(stream, cuts: Array(0...stream.utf8.count)) == whole)
    }

    @Test func aPartIsGivenOutWhenItsDelimiterArrivesNotWithTheNextPart() throws {
        var parser = MultipartParser(boundary: "graphql", maxPartBytes: 1 << 20)
        #expect(text(try parser.feed(buffer("\r\n--graphql\r\n\r\n{\"payload\":{\"data\":1}}"))) == [])
        #expect(text(try parser.feed(buffer("\r\n"))) == [])  // a chunk ending in one CRLF
        #expect(text(try parser.feed(buffer("--graphql"))) == [#"{"payload":{"data":1}}"#])
        #expect(text(try parser.feed(buffer("\r\n--graphql--"))) == ["<end>"])  // the close alone
        #expect(parser.isEnded)
        #expect(try parser.feed(buffer("epilogue")).isEmpty)
    }

    @Test func aPartOverTheLimitFailsTheStream() {
        var parser = MultipartParser(boundary: "graphql", maxPartBytes: 100)
        #expect(throws: StreamParseError.self) {
            _ = try parser.feed(buffer("\r\n--graphql\r\n\r\n{\"payload\":\"" + String(repeating: "x", count: 2_000)))
        }
        var small = MultipartParser(boundary: "graphql", maxPartBytes: 100)
        #expect(throws: StreamParseError.self) {
            _ = try small.feed(buffer("\r\n--graphql\r\n\r\n{\"p\":\"" + String(repeating: "x", count: 150) + "\"}\r\n--graphql"))
        }
    }

    @Test func theBoundaryComesFromTheContentType() {
        #expect(MultipartParser.boundary(contentType: #"multipart/mixed;boundary="graphql";subscriptionSpec=1.0"#) == "graphql")
        #expect(MultipartParser.boundary(contentType: "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json") == "graphql")
        #expect(MultipartParser.boundary(contentType: "multipart/mixed; boundary=-") == "-")
        #expect(MultipartParser.boundary(contentType: "Multipart/Mixed; Boundary=abc, application/json") == "abc")
        #expect(MultipartParser.boundary(contentType: "application/json") == nil)
        #expect(MultipartParser.boundary(contentType: "multipart/mixed") == nil)
    }
}

@Suite struct SSEParserTests {
    func summary(_ events: [SSEEvent]) -> [String] { events.map { "\($0.type) \(String(buffer: $0.data))" } }

    @Test func strawberrysCRLFStream() throws {
        #expect(
            summary(try feedSSE(Recorded.sseStrawberry, cuts: [])) == [
                #"next {"data":{"count":1}}"#, #"next {"data":{"count":2}}"#, "complete ",
            ]
        )
    }

    @Test func theReferencesLFStreamJoinsDataLines() throws {
        #expect(
            summary(try feedSSE(Recorded.sseReference, cuts: [])) == [
                "next {\"data\":\n{\"count\":1}}", #"next {"data":{"count":2}}"#, "complete ",
            ]
        )
    }

    @Test func crAloneEndsALineAndABOMIsSkipped() throws {
        #expect(summary(try feedSSE("\u{FEFF}event: next\rdata:x\r\r", cuts: [])) == ["next x"])
        #expect(summary(try feedSSE("data: plain\n\n", cuts: [])) == ["message plain"])
    }

    @Test(arguments: [Recorded.sseStrawberry, Recorded.sseReference])
    func anySplitYieldsTheSameEvents(stream: String) throws {
        let whole = try feedSSE(stream, cuts: [])
        var random = SplitMix64(seed: 0x7373_65)
        for _ in 0..<2_000 {
            let cuts = randomCuts(count: stream.utf8.count, using: &random)
            let split = try feedSSE(stream, cuts: cuts)
            #expect(split == whole, "cuts \(cuts.sorted())")
            if split != whole { return }
        }
        #expect(try feedSSE(stream, cuts: Array(0...stream.utf8.count)) == whole)
    }

    @Test func anEventOverTheLimitFailsTheStream() {
        var parser = SSEParser(maxEventBytes: 64)
        #expect(throws: StreamParseError.self) {
            _ = try parser.feed(buffer("event: next\ndata: " + String(repeating: "x", count: 100)))
        }
    }
}

@Suite struct StreamMessageTests {
    func message(_ json: String) throws -> StreamMessage { try StreamMessage.multipart(buffer(json)) }

    @Test func multipartParts() throws {
        #expect(try message("{}") == .heartbeat)
        #expect(try message(#"{"payload":{"data":{"a":1}}}"#) == .result(buffer(#"{"data":{"a":1}}"#)))
        #expect(try message(#"{"payload":{"data":null,"errors":[{"message":"x"}]}}"#) == .result(buffer(#"{"data":null,"errors":[{"message":"x"}]}"#)))
        #expect(try message(#"{"payload":null,"errors":[{"message":"x"}]}"#) == .fatal(buffer(#"[{"message":"x"}]"#)))
        #expect(try message(#"{"payload":null}"#) == .ignored)
        #expect(try message(#"{"data":{"n":1}}"#) == .result(buffer(#"{"data":{"n":1}}"#)))
        #expect(throws: StreamParseError.self) { try message("not json") }
        #expect(throws: StreamParseError.self) { try StreamMessage.multipart(ByteBuffer(bytes: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D])) }
    }

    @Test func sseEvents() throws {
        #expect(try StreamMessage.sse(SSEEvent(type: "next", data: buffer(#"{"data":1}"#))) == .result(buffer(#"{"data":1}"#)))
        #expect(try StreamMessage.sse(SSEEvent(type: "complete", data: buffer(""))) == .completed)
        #expect(try StreamMessage.sse(SSEEvent(type: "message", data: buffer("x"))) == .ignored)
        #expect(throws: StreamParseError.self) { try StreamMessage.sse(SSEEvent(type: "next", data: buffer("[1"))) }
    }
}
