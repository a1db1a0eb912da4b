import EndpointServer
import GQLMuxConfiguration
import GQLMuxVocabulary
import Handover
import NIOCore
import NIOPosix
import RequestValidation

#if canImport(Glibc)
import Glibc
#endif

/// The online restart, the next process's side: the client connections the previous gqlmuxd
/// left in systemd's file descriptor store are adopted as they are (a line-protocol client
/// past its `connection_init`, an endpoint WebSocket past its upgrade and `connection_ack`, an
/// endpoint SSE or multipart stream past its response's head),
/// and each of their subscriptions is subscribed again, deduplicated as ever, as resuming:
/// line clients, told `reconnecting` by the previous process, hear `active` with `gapMs` when
/// the stream is back; WebSocket clients see only the gap. A record that cannot be read
/// closes every passed connection and the daemon starts clean.
extension Daemon {
    /// What the previous process left in the file descriptor store.
    package struct Inheritance: Sendable {
        /// The record (``HandoverState``'s bytes), or why it could not be read.
        package var record: Result<[UInt8], DaemonError>?
        /// The client connections, each with its `SO_COOKIE`.
        package var clients: [(fd: CInt, cookie: UInt64?)]
        /// Its own listeners, adopted instead of binding: the line socket, the endpoint's Unix
        /// socket and its TCP port.
        package var line: CInt?
        package var graphql: CInt?
        package var tcp: CInt?

        package init(
            record: Result<[UInt8], DaemonError>? = nil,
            clients: [(fd: CInt, cookie: UInt64?)] = [],
            line: CInt? = nil,
            graphql: CInt? = nil,
            tcp: CInt? = nil
        ) {
            self.record = record
            self.clients = clients
            self.line = line
            self.graphql = graphql
            self.tcp = tcp
        }

        /// Whether anything was left at all.
        package var isEmpty: Bool { record == nil && clients.isEmpty && line == nil && graphql == nil && tcp == nil }
    }

    /// Adopts the clients of `inheritance`; on the daemon's loop only for what touches its
    /// state. Returns how many were adopted.
    @discardableResult
    func adopt(_ inheritance: Inheritance) async -> Int {
        guard inheritance.record != nil || !inheritance.clients.isEmpty else { return 0 }
        let began = NIODeadline.now()
        let state: HandoverState
        do {
            guard let record = inheritance.record else { throw DaemonError("client connections came without their record") }
            state = try HandoverState(decoding: record.get())
        } catch {
            for client in inheritance.clients { await closeCleanly(client.fd) }
            events.emit(
                .handoverUnreadable,
                ["GQLMUX_ERROR": "\(error)", "GQLMUX_CLIENTS": "\(inheritance.clients.count)"],
                message: "the previous process's handover cannot be read (\(error)); closed its \(inheritance.clients.count) client connections"
            )
            return 0
        }
        var records: [UInt64: HandoverState.Client] = [:]
        for client in state.clients { records[client.cookie] = client }
        var matched: [(fd: CInt, record: HandoverState.Client)] = []
        var unmatched = 0
        for client in inheritance.clients {
            guard let cookie = client.cookie, let record = records.removeValue(forKey: cookie) else {
                await closeCleanly(client.fd)
                unmatched += 1
                continue
            }
            matched.append((client.fd, record))
        }
        // All at once: each adoption waits on the loop a few times; 1,000 clients with 10,000
        // subscriptions took 1.9 s one after another, 1.0–1.3 s this way (restart-scale.sh).
        guard let limits = try? await eventLoop.submit({ self.configuration.limits }).get() else {
            for (fd, _) in matched { close(fd) }  // the loop is gone: nothing can be adopted
            return 0
        }
        let handedAt = state.handedAt
        let laneCredentials = state.laneCredentials
        let (adopted, subscriptions) = await withTaskGroup(of: Int?.self) { group in
            for (fd, record) in matched {
                group.addTask {
                    do {
                        try await self.adoptClient(fd, record, laneCredentials: laneCredentials, since: handedAt, limits: limits)
                        return record.subscriptions.count
                    } catch {
                        return nil
                    }
                }
            }
            var adopted = 0
            var subscriptions = 0
            for await count in group {
                guard let count else { continue }
                adopted += 1
                subscriptions += count
            }
            return (adopted, subscriptions)
        }
        unmatched += matched.count - adopted
        let took = (NIODeadline.now() - began).nanoseconds / 1_000_000
        events.emit(
            .adopted,
            [
                "GQLMUX_CLIENTS": "\(adopted)", "GQLMUX_SUBSCRIPTIONS": "\(subscriptions)", "GQLMUX_UNMATCHED": "\(unmatched)",
                "GQLMUX_DURATION_MS": "\(took)",
            ],
            message: "adopted \(adopted) clients with \(subscriptions) subscriptions from the previous process in \(took) ms"
        )
        return adopted
    }

    /// Ends a passed connection that is not adopted so that its client reads an orderly end:
    /// our side's output is shut first, whatever the client still sends (or sent while no
    /// process read) is read and dropped, and the socket closes when the client closes its side,
    /// or after a second. A bare close(2) with unread input would reset the connection instead.
    private func closeCleanly(_ fd: CInt) async {
        let channel = try? await ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(DrainAndClose()) }
            }
            .withConnectedSocket(fd).get()
        if channel == nil { close(fd) }
    }

    /// One carried connection: its handlers as they were after its handshake, then its
    /// subscriptions again.
    private func adoptClient(
        _ fd: CInt,
        _ record: HandoverState.Client,
        laneCredentials: [HandoverState.Client.Credential],
        since: Instant,
        limits: DaemonConfiguration.Limits
    ) async throws {
        // The session its handlers were built with, handed from the initializer to the resume.
        let carried = NIOLoopBoundBox.makeEmptyBox(valueType: ClientSession.self, eventLoop: eventLoop)
        _ = try await ClientBootstrap(group: eventLoop)
            .clientSocketOptions(limits, origin: record.origin)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard self.admitConnection(channel, origin: record.origin) else { throw DaemonError("its listener is full") }
                    guard let session = try self.configureClient(channel, listener: record.origin, arrival: .carried(record)) else {
                        throw DaemonError("a carried connection was given no session")
                    }
                    carried.value = session
                    session.name = record.name
                    if let connectedAtMs = record.connectedAtMs { session.connectedAtMs = connectedAtMs }
                    session.restarts = (record.restarts ?? 0) + 1
                    session.present(PresentedCredential(payload: record.presentedPayload.map { Array($0.utf8) }, headers: record.presentedHeaders))
                }
            }
            .withConnectedSocket(fd).get()
        try await eventLoop.submit {
            guard let session = carried.value else { return }
            // Refused as it opened (its uid is no longer allowed): it is closing, and resumes nothing.
            guard self.sessions[ObjectIdentifier(session)] != nil else { return }
            self.run.resumingCarriedClient = true
            defer { self.run.resumingCarriedClient = false }
            session.resume(record.subscriptions, laneCredentials: laneCredentials, since: since)
        }.get()
    }
}

/// The only handler of a passed connection that is being ended (``Daemon/closeCleanly(_:)``).
private final class DrainAndClose: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { begin(context) }
    }

    func channelActive(context: ChannelHandlerContext) { begin(context) }

    private var begun = false

    private func begin(_ context: ChannelHandlerContext) {
        guard !begun else { return }
        begun = true
        let channel = context.channel
        channel.close(mode: .output, promise: nil)
        channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

@available(*, unavailable)
extension DrainAndClose: Sendable {}
