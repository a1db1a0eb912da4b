import Foundation
import GQLMuxDaemon
import Glibc
import NIOCore
import TestUpstream
import Testing

/// The online restart through real daemons and real sockets, this process standing in for
/// systemd's file descriptor store (`DaemonRig.restartOnline`): clients are carried, told
/// `reconnecting` then `active` with `gapMs`, and never closed; what cannot be carried whole is
/// closed cleanly; a record that cannot be read closes what was passed and starts clean.
@Suite struct OnlineRestartTests {
    @Test func aLineClientIsCarriedToTheNextDaemonWithoutAClose() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.send(#"{"type":"connection_init","payload":{"client":"carried"}}"#)
            client.subscribe(id: "t")
            client.subscribe(id: "u", "subscription { tick }  # the same stream, shared")
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            await eventually("a first result each") { client.lines(containing: #""type":"next""#).count == 2 }

            try await rig.restartOnline()
            #expect(rig.log.all(.handedOver).first?["GQLMUX_CLIENTS"] == "1")
            #expect(rig.log.all(.adopted).first?["GQLMUX_SUBSCRIPTIONS"] == "2")
            await rig.upstreamActive(1)
            await eventually("both active again, with the gap") { client.lines(containing: "gapMs").count == 2 }
            _ = await rig.server.tick()
            await eventually("results after the restart") { client.lines(containing: #""type":"next""#).count == 4 }
            #expect(!client.isClosed)
            let states = client.lines(containing: #""id":"t""#).filter { $0.contains(#""type":"state""#) }
            #expect(states.count == 3, "\(states)")
            #expect(states.dropFirst().first?.contains(#""state":"reconnecting""#) == true, "\(states)")
            #expect(states.last?.contains(#""state":"active","gapMs":"#) == true, "\(states)")
            #expect(client.lines(containing: "SHUTTING_DOWN").isEmpty)

            // The adopted listener serves new clients; the carried one still speaks the protocol.
            let late = try await rig.connect()
            late.subscribe(id: "l")
            await eventually("the late client is active") { late.lines(containing: #""state":"active""#).count == 1 }
            client.send(#"{"type":"complete","id":"u"}"#)
            client.send(#"{"type":"status","id":"s"}"#)
            await eventually("status answered") { client.lines(containing: #""type":"status""#).count == 1 }
            #expect(client.lines(containing: #""type":"status""#).first?.contains(#""clients":2"#) == true)
        }
    }

    @Test func aClientInTheMiddleOfALineIsClosedCleanlyAndTheOthersAreCarried() async throws {
        try await DaemonRig.with { rig in
            let whole = try await rig.connect()
            whole.subscribe(id: "a")
            let halfway = try await rig.connect()
            halfway.subscribe(id: "b")
            await eventually("both active") { whole.lines(containing: "active").count == 1 && halfway.lines(containing: "active").count == 1 }
            halfway.channel.writeAndFlush(ByteBuffer(string: #"{"type":"subscribe","id":"c","payl"#), promise: nil)
            try await Task.sleep(for: .milliseconds(100))

            try await rig.restartOnline()
            await eventually("the half-sent client is told and closed") { halfway.isClosed }
            #expect(halfway.lines(containing: "SHUTTING_DOWN").count >= 1, "\(halfway.lines)")
            #expect(rig.log.all(.handedOver).first?["GQLMUX_CLOSED"] == "1")
            _ = await rig.server.tick()
            await eventually("the whole one receives again") { whole.lines(containing: "gapMs").count == 1 }
            #expect(!whole.isClosed)
        }
    }

    @Test func aRecordThatCannotBeReadClosesThePassedConnectionsAndStartsClean() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.subscribe(id: "a")
            await rig.upstreamActive(1)

            try await rig.restartOnline { record in
                var damaged = record
                damaged[damaged.count - 2] ^= 0x01
                return damaged
            }
            await eventually("the passed connection is closed") { client.isClosed }
            let unreadable = try #require(rig.log.all(.handoverUnreadable).first)
            #expect(unreadable["GQLMUX_ERROR"]?.contains("checksum") == true, "\(unreadable)")
            #expect(unreadable["GQLMUX_CLIENTS"] == "1")
            let fresh = try await rig.connect()
            fresh.subscribe(id: "b")
            await eventually("a new client is served") { fresh.lines(containing: #""state":"active""#).count == 1 }
        }
    }
}
