import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

@Suite struct MessageTests {
    @Test func parsesEveryServerMessage() throws {
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"connection_ack"}"#)) == .connectionAck(payload: nil))
        #expect(
            try ServerMessage.parse(ByteBuffer(string: #" {"payload": {"a" : [1, 2.5e3]}, "id":"x\u0031", "type":"next"} "#))
                == .next(id: "x1", payload: ByteBuffer(string: #"{"a" : [1, 2.5e3]}"#))
        )
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"error","id":"1","payload":[]}"#)) == .error(id: "1", payload: ByteBuffer(string: "[]")))
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"complete","id":"1"}"#)) == .complete(id: "1"))
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"ping","payload":null}"#)) == .ping(payload: nil))
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"pong"}"#)) == .pong(payload: nil))
    }

    @Test(arguments: [
        "", "{", #"{"type":1}"#, #"{"type":"next","id":"","payload":{}}"#, #"{"type":"next","id":"1","payload":[]}"#,
        #"{"type":"error","id":"1","payload":{}}"#, #"{"type":"complete"}"#, #"{"type":"subscribe","id":"1"}"#,
        #"{"type":"next","id":"1","payload":{"a":01}}"#, #"{"type":"next","id":"1","payload":{"a":"\x"}}"#,
        #"{"type":"pong"} extra"#, #"{"type":"ping","payload":"str"}"#,
    ])
    func rejectsMalformedMessages(text: String) {
        #expect(throws: ProtocolViolation.self) { try ServerMessage.parse(ByteBuffer(string: text)) }
    }

    @Test func encodesClientMessages() {
        #expect(
            String(buffer: ClientMessage.subscribe(id: "a\"b", payload: ByteBuffer(string: #"{"query":"{x}"}"#)).encode())
                == #"{"type":"subscribe","id":"a\"b","payload":{"query":"{x}"}}"#
        )
        #expect(String(buffer: ClientMessage.complete(id: "7").encode()) == #"{"type":"complete","id":"7"}"#)
        #expect(String(buffer: ClientMessage.pong(payload: ByteBuffer(string: "{}")).encode()) == #"{"type":"pong","payload":{}}"#)
        #expect(String(buffer: ClientMessage.connectionInit(payload: nil).encode()) == #"{"type":"connection_init"}"#)
        #expect(String(buffer: ClientMessage.ping(payload: nil).encode()) == #"{"type":"ping"}"#)
    }

    @Test func writesJSONStringsThatDecodeBackToTheSameText() throws {
        let original = "q\"b\\s\n\r\t\u{01}\u{1F}é😀/"
        var buffer = ByteBuffer()
        buffer.writeJSONString(original)
        #expect(String(buffer: buffer) == #""q\"b\\s\n\r\t\u0001\u001fé😀/""#)
        let object = ByteBuffer(string: "{\"k\":" + String(buffer: buffer) + "}")
        let decoded = try object.withUnsafeReadableBytes { bytes in
            let members = try JSONScanner.scanObject(bytes)
            return JSONScanner.decodeString(bytes, members[0].range)
        }
        #expect(decoded == original)
    }

    @Test func decodesEscapedStringsIncludingSurrogatePairs() throws {
        let text = #"{"k\n":"\ud83d\ude00 \u00e9\t\"q\""}"#
        let members = try Array(text.utf8).withUnsafeBytes { bytes in
            let members = try JSONScanner.scanObject(bytes)
            return members.map { ($0.key, JSONScanner.decodeString(bytes, $0.range)) }
        }
        #expect(members.count == 1)
        #expect(members[0].0 == "k\n")
        #expect(members[0].1 == "😀 é\t\"q\"")
    }

    @Test func rejectsDeeplyNestedJSON() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONScanError.self) {
            try Array(deep.utf8).withUnsafeBytes { try JSONScanner.validate($0) }
        }
    }
}
