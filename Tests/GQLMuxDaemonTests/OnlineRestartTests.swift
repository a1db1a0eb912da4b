import Foundation
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TestUpstream
import Testing

@testable import GQLMuxDaemon

/// The online restart through real daemons and real sockets, this process standing in for
/// systemd's file descriptor store (`DaemonRig.restartOnline`): clients are carried, told
/// `reconnecting` then `active` with `gapMs`, and never closed; what cannot be carried whole is
/// closed cleanly; a record that cannot be read closes what was passed and starts clean.
@Suite struct OnlineRestartTests {
    /// `gqlmuxctl restart` asks the service manager once: a second request while the first
    /// stop is under way is refused with the reason, and the stop is asked for once.
    @Test func aSecondRestartIsRefusedAsAlreadyStopping() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let configuration = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://127.0.0.1:9/graphql\"\nlazy = true")
        let asked = NIOLockedValueBox(0)
        let restart = DaemonHooks.OnlineRestart(store: { _ in }, requestStop: { asked.withLockedValue { $0 += 1 } })
        let daemon = try Daemon(
            configuration: configuration,
            configPath: nil,
            eventLoop: group.next(),
            events: EventLog().events,
            hooks: DaemonHooks(onlineRestart: restart)
        )
        let answers = try await daemon.eventLoop.submit { [daemon.restart(), daemon.restart()] }.get()
        #expect(answers[0] == nil, "the first is begun")
        #expect(answers[1] == "gqlmuxd is already stopping")
        try await daemon.eventLoop.submit {}.get()  // the stop is asked for after the answer's turn
        #expect(asked.withLockedValue { $0 } == 1)
        #expect(daemon.restartRequested)
        try await group.shutdownGracefully()
    }

    @Test func aLineClientIsCarriedToTheNextDaemonWithoutAClose() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.send(#"{"type":"connection_init","payload":{"client":"carried"}}"#)
            client.subscribe(id: "t")
            client.subscribe(id: "u", "subscription { tick }  # the same stream, shared")
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            await until("a first result each", on: client) { client.lines(containing: #""type":"next""#).count == 2 }

            try await rig.restartOnline()
            #expect(rig.log.all(.handedOver).first?["GQLMUX_CLIENTS"] == "1")
            #expect(rig.log.all(.adopted).first?["GQLMUX_SUBSCRIPTIONS"] == "2")
            await rig.upstreamActive(1)
            await until("both active again, with the gap", on: client) { client.lines(containing: "gapMs").count == 2 }
            _ = await rig.server.tick()
            await until("results after the restart", on: client) { client.lines(containing: #""type":"next""#).count == 4 }
            #expect(!client.isClosed)
            let states = client.lines(containing: #""id":"t""#).filter { $0.contains(#""type":"state""#) }
            #expect(states.count == 3, "\(states)")
            #expect(states.dropFirst().first?.contains(#""state":"reconnecting""#) == true, "\(states)")
            #expect(states.last?.contains(#""state":"active","gapMs":"#) == true, "\(states)")
            #expect(client.lines(containing: "SHUTTING_DOWN").isEmpty)

            // The adopted listener serves new clients; the carried one still speaks the protocol.
            let late = try await rig.connect()
            late.subscribe(id: "l")
            await until("the late client is active", on: late) { late.lines(containing: #""state":"active""#).count == 1 }
            client.send(#"{"type":"complete","id":"u"}"#)
            client.send(#"{"type":"status","id":"s"}"#)
            await until("status answered", on: client) { client.lines(containing: #""type":"status""#).count == 1 }
            #expect(client.lines(containing: #""type":"status""#).first?.contains(#""clients":2"#) == true)
        }
    }

    /// An SSE or multipart stream of the endpoint goes on in the next process: the same HTTP
    /// response, its chunked body whole (no chunk cut, no last chunk), results again after the
    /// gap, and the connection never closed.
    @Test(arguments: ["text/event-stream", "multipart/mixed;subscriptionSpec=1.0"])
    func anEndpointStreamGoesOnInTheNextDaemon(accept: String) async throws {
        try await DaemonRig.with { rig in
            let stream = try await RawStreamClient.connect(rig.directory + "/graphql.sock", group: rig.clientGroup)
            stream.subscribeToTicks(accept: accept)
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            await eventually("a first result") { (try? stream.response().body.components(separatedBy: #""tick""#).count) == 2 }

            try await rig.restartOnline()
            #expect(rig.log.all(.handedOver).first?["GQLMUX_CLIENTS"] == "1", "\(rig.log.all(.handedOver))")
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            await eventually("results after the restart") { (try? stream.response().body.components(separatedBy: #""tick""#).count) ?? 0 >= 3 }
            let response = try stream.response()
            #expect(response.head.hasPrefix("HTTP/1.1 200 OK"), "\(response.head)")
            #expect(!response.ended, "the stream was not ended")
            #expect(!stream.isClosed)
        }
    }

    @Test func aClientInTheMiddleOfALineIsClosedCleanlyAndTheOthersAreCarried() async throws {
        try await DaemonRig.with { rig in
            let whole = try await rig.connect()
            whole.subscribe(id: "a")
            let halfway = try await rig.connect()
            halfway.subscribe(id: "b")
            await until("both active", on: whole, halfway) { whole.lines(containing: "active").count == 1 && halfway.lines(containing: "active").count == 1 }
            halfway.channel.writeAndFlush(ByteBuffer(string: #"{"type":"subscribe","id":"c","payl"#), promise: nil)
            try await Task.sleep(for: .milliseconds(100))

            try await rig.restartOnline()
            await until("the half-sent client is told and closed", on: halfway) { halfway.isClosed }
            #expect(halfway.lines(containing: "SHUTTING_DOWN").count >= 1, "\(halfway.lines)")
            #expect(rig.log.all(.handedOver).first?["GQLMUX_CLOSED"] == "1")
            _ = await rig.server.tick()
            await until("the whole one receives again", on: whole) { whole.lines(containing: "gapMs").count == 1 }
            #expect(!whole.isClosed)
        }
    }

    @Test func aStoreThatRefusesMakesItAStopTheClientsAreToldAndClosed() async throws {
        struct Refused: Error {}
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.subscribe(id: "a")
            await rig.upstreamActive(1)
            rig.handoverStore.withLockedValue { $0 = { _ in throw Refused() } }
            await rig.stopDaemon()
            await until("the client is told and closed", on: client) { client.isClosed }
            #expect(client.lines(containing: "SHUTTING_DOWN").count >= 1, "\(client.lines)")
            #expect(rig.log.count(.handoverFailed) == 1)
            #expect(rig.log.count(.handedOver) == 0)
        }
    }

    @Test func aRecordThatCannotBeReadClosesThePassedConnectionsAndStartsClean() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.subscribe(id: "a")
            await rig.upstreamActive(1)

            try await rig.restartOnline { record in
                // Sent between the two processes: unread by either when the record is refused.
                client.send(#"{"type":"subscribe","id":"late","payload":{"query":"subscription { tick }"}}"#)
                usleep(100_000)
                var damaged = record
                damaged[damaged.count - 2] ^= 0x01
                return damaged
            }
            await until("the passed connection is closed", on: client) { client.isClosed }
            #expect(client.errors.isEmpty, "an orderly end, not a reset: \(client.errors)")
            let unreadable = try #require(rig.log.all(.handoverUnreadable).first)
            #expect(unreadable["GQLMUX_ERROR"]?.contains("checksum") == true, "\(unreadable)")
            #expect(unreadable["GQLMUX_CLIENTS"] == "1")
            let fresh = try await rig.connect()
            fresh.subscribe(id: "b")
            await until("a new client is served", on: fresh) { fresh.lines(containing: #""state":"active""#).count == 1 }
        }
    }
}

/// An HTTP client that keeps every byte of one streamed response.
/// `@unchecked Sendable` — safe because what it records is in a lock-protected box
/// (`NIOLockedValueBox`), and `channel` is set once by `connect` before the client is returned;
/// its handler methods assert they run on the channel's loop (`assertInEventLoop`).
final class RawStreamClient: ChannelInboundHandler, Changing, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let box = NIOLockedValueBox<(bytes: [UInt8], closed: Bool)>(([], false))
    let changes = Changes()
    private var channel: (any Channel)?

    static func connect(_ path: String, group: any EventLoopGroup) async throws -> RawStreamClient {
        let client = RawStreamClient()
        client.channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(client) } }
            .connect(unixDomainSocketPath: path).get()
        return client
    }

    func send(_ text: String) { channel?.writeAndFlush(ByteBuffer(string: text), promise: nil) }

    /// Asks for `subscription { tick }` as a stream of the kind `accept` names.
    func subscribeToTicks(accept: String) {
        let body = #"{"query":"subscription { tick }"}"#
        send(
            "POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: \(accept)\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        )
    }
    var isClosed: Bool { box.withLockedValue { $0.closed } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.eventLoop.assertInEventLoop()
        let bytes = Array(unwrapInboundIn(data).readableBytesView)
        box.withLockedValue { $0.bytes += bytes }
        changes.changed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        box.withLockedValue { $0.closed = true }
        changes.changed()
    }

    struct Malformed: Error, CustomStringConvertible { var description: String }

    /// The response so far: its head, its chunked body decoded (every chunk whole), and
    /// whether the last chunk came.
    func response() throws -> (head: String, body: String, ended: Bool) {
        let bytes = box.withLockedValue { $0.bytes }
        guard let split = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { throw Malformed(description: "no head yet") }
        let head = String(decoding: bytes[..<split.lowerBound], as: UTF8.self)
        guard head.lowercased().contains("transfer-encoding: chunked") else { throw Malformed(description: "not chunked: \(head)") }
        var at = split.upperBound
        var body: [UInt8] = []
        while at < bytes.count {
            guard let lineEnd = bytes[at...].firstRange(of: Array("\r\n".utf8)),
                let size = Int(String(decoding: bytes[at..<lineEnd.lowerBound], as: UTF8.self), radix: 16)
            else { throw Malformed(description: "a chunk size line is cut or wrong at byte \(at)") }
            if size == 0 { return (head, String(decoding: body, as: UTF8.self), true) }
            let start = lineEnd.upperBound
            guard start + size + 2 <= bytes.count, bytes[start + size] == 13, bytes[start + size + 1] == 10 else {
                throw Malformed(description: "a chunk is cut at byte \(at)")
            }
            body += bytes[start..<start + size]
            at = start + size + 2
        }
        return (head, String(decoding: body, as: UTF8.self), false)
    }
}
