import GQLMuxVocabulary
import NIOCore
import NIOPosix
import Testing

@testable import GQLMuxDaemon

/// Every Unix-socket client's socket gets the larger kernel send buffer, whichever listener
/// accepted it, so a burst of results is taken whole by the kernel instead of kept and copied
/// by the daemon.
@Suite struct ClientSocketOptionsTests {
    @Test func lineAndEndpointUnixClientsGetTheLargerKernelSendBuffer() async throws {
        try await DaemonRig.with { rig in
            let line = try await rig.connect()
            line.subscribe(id: "l")
            let stream = try await RawStreamClient.connect(rig.directory + "/graphql.sock", group: rig.clientGroup)
            stream.subscribeToTicks(accept: "text/event-stream")
            await rig.upstreamActive(1)
            await eventually("the stream answered") { (try? stream.response()) != nil }
            let daemon = rig.daemon
            let buffers = try await daemon.eventLoop.submit {
                try daemon.sessions.values.map { session in
                    (session.arrival.listener, try session.channel.syncOptions!.getOption(.socketOption(.so_sndbuf)))
                }
            }.get()
            #expect(Set(buffers.map(\.0)) == [.lineSocket, .endpointSocket])
            for (origin, bytes) in buffers {
                // Linux doubles what is asked for, for its own bookkeeping (socket(7)).
                #expect(bytes == 2 * SocketOptionValue(ClientSocketOptions.unixSendBufferBytes), "\(origin)")
            }
        }
    }
}
