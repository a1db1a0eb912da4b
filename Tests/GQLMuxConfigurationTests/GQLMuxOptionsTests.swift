import Foundation
import GQLMuxConfiguration
import LocalEndpoint
import LocalProtocol
import NIOCore
import RequestValidation
import Testing

/// `extensions.gqlmux`: read by gqlmuxd, never sent upstream, never part of the dedup key.
@Suite struct GQLMuxOptionsTests {
    private func parse(_ payload: String) throws -> SubscribeRequest {
        try SubscribeRequest.parse(ByteBuffer(string: payload))
    }

    @Test func replayLastIsReadAndStrippedFromWhatGoesUpstream() throws {
        let request = try parse(#"{"query":"subscription { price }","extensions":{"gqlmux":{"replayLast":true},"persistedQuery":{"v":1}}}"#)
        #expect(request.options.replayLast == true)
        #expect(String(buffer: request.payload) == #"{"query":"subscription { price }","extensions":{"persistedQuery":{"v":1}}}"#)
        let alone = try parse(#"{"extensions":{"gqlmux":{"replayLast":false}},"query":"subscription { price }"}"#)
        #expect(alone.options.replayLast == false)
        #expect(String(buffer: alone.payload) == #"{"query":"subscription { price }"}"#, "an extensions object left empty is dropped")
    }

    @Test func subscribersThatDifferOnlyInGQLMuxOptionsShareOneKey() throws {
        let plain = try parse(#"{"query":"subscription { price }"}"#)
        let asking = try parse(#"{"query":"subscription { price }","extensions":{"gqlmux":{"replayLast":true}}}"#)
        #expect(plain.dedupKey == asking.dedupKey)
        let other = try parse(#"{"query":"subscription { price }","extensions":{"trace":true,"gqlmux":{"replayLast":true}}}"#)
        #expect(other.dedupKey != plain.dedupKey, "the server's own extensions still tell subscriptions apart")
        #expect(plain.options.replayLast == nil)
        #expect(String(buffer: plain.payload) == #"{"query":"subscription { price }"}"#, "a payload without gqlmux options is forwarded as it came")
    }

    @Test func badOptionsAreRefusedWithWhatIsWrong() {
        for (payload, message) in [
            (#"{"query":"subscription { a }","extensions":{"gqlmux":true}}"#, "extensions.gqlmux must be an object"),
            (#"{"query":"subscription { a }","extensions":{"gqlmux":{"replayLast":"yes"}}}"#, "extensions.gqlmux.replayLast must be true or false"),
            (#"{"query":"subscription { a }","extensions":{"gqlmux":{"replay":true}}}"#, "extensions.gqlmux has no option 'replay' (replayLast, resnapshot)"),
        ] {
            do {
                _ = try parse(payload)
                Issue.record("accepted: \(payload)")
            } catch let error as SubscribeRequest.Invalid {
                #expect(error.message == message)
                #expect(error.code == LocalErrorCode.badRequest)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    @Test func replayedResultsAreMarkedInExtensionsForEndpointClients() {
        #expect(
            String(buffer: ResultMarks.marked(ByteBuffer(string: #"{"data":{"a":1}}"#), "replayed"))
                == #"{"data":{"a":1},"extensions":{"gqlmux":{"replayed":true}}}"#
        )
        #expect(
            String(buffer: ResultMarks.marked(ByteBuffer(string: #"{"data":null,"extensions":{"cost":3}}"#), "replayed"))
                == #"{"data":null,"extensions":{"cost":3,"gqlmux":{"replayed":true}}}"#
        )
        #expect(String(buffer: ResultMarks.marked(ByteBuffer(string: "[1]"), "replayed")) == "[1]")
        // The server's bytes are kept as they came: escapes, number spellings, white space inside values.
        #expect(
            String(buffer: ResultMarks.marked(ByteBuffer(string: #"{ "data" : {"s":"\u00e9", "n":1.0e2} }"#), "snapshot"))
                == #"{"data":{"s":"\u00e9", "n":1.0e2},"extensions":{"gqlmux":{"snapshot":true}}}"#
        )
        #expect(
            String(buffer: ResultMarks.marked(ByteBuffer(string: #"{"extensions":{"gqlmux":{"replayed":true}},"data":{}}"#), "snapshot"))
                == #"{"extensions":{"gqlmux":{"replayed":true,"snapshot":true}},"data":{}}"#
        )
        #expect(String(buffer: ResultMarks.marked(ByteBuffer(string: "{}"), "replayed")) == #"{"extensions":{"gqlmux":{"replayed":true}}}"#)
        #expect(
            String(buffer: ResultMarks.marked(ByteBuffer(string: #"{"extensions":{}}"#), "replayed")) == #"{"extensions":{"gqlmux":{"replayed":true}}}"#
        )
    }

    @Test func theDaemonDefaultIsReadFromSubscriptions() throws {
        let path = "/tmp/gqlmux-options-\(UInt32.random(in: 0...UInt32.max)).toml"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "[upstream]\nurl = \"ws://127.0.0.1:1/graphql\"\n[subscriptions]\nreplay_last = true\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try DaemonConfiguration.load(path: path).replayLast)
        try "[upstream]\nurl = \"ws://127.0.0.1:1/graphql\"\n[subscriptions]\nreplay = true\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(path: path) }
    }
}
