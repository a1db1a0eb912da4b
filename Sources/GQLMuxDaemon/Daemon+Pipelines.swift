import EndpointServer
import GQLMuxVocabulary
import Handover
import LocalProtocol
import NIOCore
import ResultDelivery

/// The one place a client connection's handlers are built, whichever listener accepted it, and
/// whether accepted now or carried over a restart: the line socket's here, the endpoint's
/// through ``EndpointPipeline``, so a carried connection gets the handlers a fresh one of its
/// kind gets, and the online restart asks only the wire each session was told of.
///
///     line socket ──▶ LineFrameDecoder, LineWire, ClientSession (accepted or carried alike)
///     endpoint ──▶ EndpointPipeline: the HTTP handlers, or a carried WebSocket's or stream's
extension Daemon {
    /// Builds `channel`'s handlers on its loop. Returns its session when it has one at once (a
    /// line client, a carried endpoint client); an accepted endpoint client's comes with its
    /// first request or upgrade.
    @discardableResult
    func configureClient(_ channel: any Channel, listener: ClientOrigin, arrival: ConnectionArrival) throws -> ClientSession? {
        switch listener {
        case .lineSocket:
            if case .carried(let record) = arrival, record.kind != .line {
                throw DaemonError("a carried \(record.kind.rawValue) client cannot be a line-socket client")
            }
            return try addLineHandlers(channel)
        case .endpointSocket, .endpointTCP:
            return try EndpointPipeline.configure(channel, origin: listener, arrival: arrival, host: self)
        }
    }

    /// A line-protocol client's handlers, its session last: accepted now, or carried over a
    /// restart. On the channel's loop.
    private func addLineHandlers(_ channel: any Channel) throws -> ClientSession {
        let limits = configuration.limits
        let sync = channel.pipeline.syncOperations
        let reservation = NIOLoopBound(InboundReservation(budget: self.switchboard.budget), eventLoop: channel.eventLoop)
        channel.closeFuture.whenComplete { _ in reservation.value.release() }
        reservation.value.onCut = {
            let error = LocalEncode.line(
                .error(
                    id: nil,
                    .local(code: .limitExceeded, message: "the daemon's memory budget (total_buffer_bytes) is full; your unfinished line was dropped")
                )
            )
            channel.writeAndFlush(error).whenComplete { _ in channel.close(promise: nil) }
        }
        let decoder = LineFrameDecoder(maxLineBytes: limits.maxLineBytes, holding: { reservation.value.hold($0) })
        try sync.addHandler(ByteToMessageHandler(decoder))
        let wire = LineWire(documentLimits: { [unowned self] in self.documentLimits })
        try sync.addHandler(wire)
        let session = makeSession(channel, arrival: .init(.lineSocket, output: .lines))
        session.inbound = reservation.value
        session.wire = wire
        try sync.addHandler(session)
        return session
    }
}
