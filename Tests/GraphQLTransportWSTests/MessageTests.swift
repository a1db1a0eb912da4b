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

    /// Keys are compared as bytes only when that decides: an escaped key is decoded first, and
    /// a key that merely starts or ends like a known one is not it.
    @Test func keysAreMatchedByWhatTheyDecodeTo() throws {
        #expect(
            try ServerMessage.parse(ByteBuffer(string: #"{"typ\u0065":"next","\u0069d":"7","p\u0061yload":{"a":1}}"#))
                == .next(id: "7", payload: ByteBuffer(string: #"{"a":1}"#))
        )
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"complete","ids":"1","i":"2","id":"3","idd":4}"#)) == .complete(id: "3"))
        #expect(throws: ProtocolViolation.self) { try ServerMessage.parse(ByteBuffer(string: #"{"types":"complete","id":"1"}"#)) }
        #expect(throws: ProtocolViolation.self) { try ServerMessage.parse(ByteBuffer(string: #"{"\u0074ype":"next","id":"1","payloads":{}}"#)) }
        // A later member of the same name wins, as before.
        #expect(try ServerMessage.parse(ByteBuffer(string: #"{"type":"ping","type":"pong"}"#)) == .pong(payload: nil))
    }

    /// Invalid JSON is told as invalid JSON (4400, or 1007 for bad UTF-8) even when a member
    /// before the fault has the wrong type.
    @Test func invalidJSONIsToldBeforeAMistypedMember() {
        do {
            _ = try ServerMessage.parse(ByteBuffer(bytes: Array(#"{"type":1,"id":""#.utf8) + [0xFF] + Array(#""}"#.utf8)))
            Issue.record("parsed")
        } catch {
            #expect(error.closeCode == 1007)
        }
        do {
            _ = try ServerMessage.parse(ByteBuffer(string: #"{"type":1,"id":"1""#))
            Issue.record("parsed")
        } catch {
            #expect(error.reason.contains("expected ',' or '}'"))
        }
        do {
            _ = try ServerMessage.parse(ByteBuffer(string: #"{"type":1,"id":"1"}"#))
            Issue.record("parsed")
        } catch {
            #expect(error.reason.contains("'type' must be a string"))
        }
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
}
