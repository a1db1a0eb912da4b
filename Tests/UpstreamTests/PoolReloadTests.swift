import GQLMuxConfiguration
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOPosix
import Testing

@testable import Upstream

/// A reload replaces each pool connection's configuration whole: the first connection and an
/// extra one run the same settings afterwards (timing keys included), and only the extra one is
/// lazy.
@Suite struct PoolReloadTests {
    @Test func everyConnectionRunsTheWholeReloadedConfiguration() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let first = try DaemonConfiguration.parse(
            """
            [upstream]
            url = "ws://127.0.0.1:9/graphql"
            lazy = true
            max_connections = 2
            """
        )
        let prepared = try PreparedUpstream(first.upstream, checkPayloadFile: false)
        var second = try DaemonConfiguration.parse(
            """
            [upstream]
            url = "ws://127.0.0.1:10/other"
            lazy = true
            max_connections = 2
            ping_interval = 3
            connection_ack_timeout = 4
            reconnect_interval = 0.25
            operation_timeout = 7
            headers = { Authorization = "Bearer new" }
            """
        )
        second.upstream.reconnectIfConnected = false
        let reloaded = try PreparedUpstream(second.upstream, checkPayloadFile: false)
        let settings = try await loop.flatSubmit { () -> EventLoopFuture<[UpstreamConfiguration]> in
            let pool = ConnectionPool(upstream: prepared, eventLoop: loop)
            _ = pool.connection(1)
            pool.applyOnLoop(reloaded)
            let settings = pool.members.map(\.configurationOnLoop)
            return pool.shutdown().map { settings }
        }.get()
        #expect(settings.count == 2)
        for (index, member) in settings.enumerated() {
            #expect(member.url.description == "ws://127.0.0.1:10/other", "connection \(index)")
            #expect(member.transport.pingInterval == .seconds(3), "connection \(index)")
            #expect(member.transport.ackTimeout == .seconds(4), "connection \(index)")
            #expect(member.transport.backoff.initial == .milliseconds(250), "connection \(index)")
            #expect(member.transport.operationTimeout == .seconds(7), "connection \(index)")
            #expect(member.headers.map(\.value) == ["Bearer new"], "connection \(index)")
        }
        #expect(settings[1].transport.lazy, "an extra connection stays lazy")
    }
}
