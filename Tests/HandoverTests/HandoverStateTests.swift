import Foundation
import GQLMuxTestSupport
import GQLMuxVocabulary
import HTTPFields
import Handover
import Testing

/// The record a restarting gqlmuxd leaves the next process: read back exactly as written, and
/// refused whole when it is of another version, cut short or damaged.
@Suite struct HandoverStateTests {
    private let state = HandoverState(
        handedAt: Instant(nanoseconds: 123_456_789_000),
        clients: [
            .init(
                cookie: UInt64.max - 7,
                origin: .lineSocket,
                kind: .line,
                name: "app \"one\"",
                subscriptions: [
                    .init(id: "1", payload: #"{"query":"subscription { tick }","variables":{"a":"é\n"}}"#),
                    .init(id: "two", payload: #"{"query":"subscription { price }"}"#, snapshot: #"{"query":"{ price }"}"#),
                ]
            ),
            .init(cookie: 42, origin: .endpointTCP, kind: .legacyWS, acknowledged: false),
            .init(cookie: 43, origin: .endpointSocket, kind: .transportWS),
        ]
    )

    @Test func aRecordReadsBackAsWritten() throws {
        #expect(try HandoverState(decoding: state.encoded()) == state)
        #expect(try HandoverState(decoding: HandoverState(handedAt: Instant(nanoseconds: 0), clients: []).encoded()).clients.isEmpty)
    }

    /// Every version's record as its release wrote it, kept byte for byte in Tests/Fixtures
    /// (`handover-vN.record`, this suite's `state`): a gqlmuxd that restarts into a newer one
    /// must be adopted, or refused whole. A new version adds its fixture here (written with
    /// GQLMUX_WRITE_FIXTURES=1) and keeps reading the ones before it, or says why it cannot.
    @Test func theRecordsOfEveryReleasedVersionReadBack() throws {
        let fixtures = URL(fileURLWithPath: repositoryRoot() + "/Tests/Fixtures")
        let current = fixtures.appendingPathComponent("handover-v\(HandoverState.version).record")
        if ProcessInfo.processInfo.environment["GQLMUX_WRITE_FIXTURES"] == "1" { try Data(state.encoded()).write(to: current) }
        for version in 1...HandoverState.version {
            let bytes = try [UInt8](Data(contentsOf: fixtures.appendingPathComponent("handover-v\(version).record")))
            #expect(try HandoverState(decoding: bytes) == state, "version \(version)")
        }
        #expect(try [UInt8](Data(contentsOf: current)) == state.encoded(), "this version writes its fixture's bytes")
    }

    @Test func anotherVersionIsRefusedAndSaysWhich() {
        var bytes = state.encoded()
        bytes[HandoverState.format.utf8.count + 1] = UInt8(ascii: "9")
        #expect(throws: HandoverState.Unreadable("handover record version 9; this gqlmuxd reads versions 1 and 2")) { try HandoverState(decoding: bytes) }
    }

    @Test func aRecordCutShortIsRefused() {
        let bytes = state.encoded()
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: Array(bytes.dropLast(5))) }
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: []) }
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: Array("gqlmux-handover 1".utf8)) }
    }

    @Test func everySingleFlippedByteIsCaught() {
        let bytes = state.encoded()
        for index in bytes.indices {
            var damaged = bytes
            damaged[index] ^= 0x20
            #expect(throws: HandoverState.Unreadable.self, "byte \(index)") { try HandoverState(decoding: damaged) }
        }
    }

    /// Credentials of lanes their clients no longer present for, each named by the
    /// subscriptions made with it: read back as written in a version 2 record (a record without
    /// them is version 1, byte for byte as before), and an index past them refused.
    @Test func subscriptionsNameTheCredentialTheyWereMadeWith() throws {
        let first = HandoverState.Client.Credential(payload: #"{"token":"first"}"#)
        let second = HandoverState.Client.Credential(headers: [.init(name: "Authorization", value: "Bearer 2")])
        let carried = HandoverState(
            handedAt: Instant(nanoseconds: 1),
            clients: [
                .init(
                    cookie: 7,
                    origin: .lineSocket,
                    kind: .line,
                    subscriptions: [
                        .init(id: "a", payload: #"{"query":"subscription { a }"}"#, upstream: "who", credential: 0),
                        .init(id: "b", payload: #"{"query":"subscription { b }"}"#, upstream: "who", credential: 1),
                        .init(id: "c", payload: #"{"query":"subscription { c }"}"#, upstream: "who"),
                    ],
                    presentedPayload: #"{"token":"latest"}"#
                )
            ],
            laneCredentials: [first, second]
        )
        let bytes = carried.encoded()
        #expect(bytes.starts(with: Array("gqlmux-handover 2 ".utf8)))
        #expect(try HandoverState(decoding: bytes) == carried)
        #expect(state.encoded().starts(with: Array("gqlmux-handover 1 ".utf8)))
        var past = carried
        past.clients[0].subscriptions[2].credential = 2
        #expect(throws: HandoverState.Unreadable("handover record has a subscription naming a credential its client does not have")) {
            try HandoverState(decoding: past.encoded())
        }
        // Version 2 with no table, or a table entry that is not a credential, is refused whole.
        let noTable = Array(#"{"handedAtNs":1,"clients":[]}"#.utf8)
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: HandoverState.record(body: noTable, version: 2)) }
        let badEntry = Array(#"{"handedAtNs":1,"clients":[],"laneCredentials":[3]}"#.utf8)
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: HandoverState.record(body: badEntry, version: 2)) }
    }

    @Test func aWellFormedBodyThatIsNotARecordIsRefused() {
        let body = Array(#"{"handedAtNs":1,"clients":[{"cookie":"1"}]}"#.utf8)
        #expect(throws: HandoverState.Unreadable.self) { try HandoverState(decoding: HandoverState.record(body: body)) }
    }
}
