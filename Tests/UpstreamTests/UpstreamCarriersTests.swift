import GQLMuxVocabulary
import NIOCore
import NIOEmbedded
import Testing
import Upstream

/// The carriers' owner before any I/O: which carriers a configuration makes, where each
/// placement lands, what a reload changes, and the one snapshot operators read.
@Suite struct UpstreamCarriersTests {
    private func carriers(_ configuration: UpstreamConfiguration, on loop: EmbeddedEventLoop) throws -> UpstreamCarriers {
        UpstreamCarriers(try PreparedUpstream(configuration, checkPayloadFile: false), eventLoop: loop) { _, _ in }
    }

    private func websocket(httpURL: String? = nil) throws -> UpstreamConfiguration {
        var configuration = UpstreamConfiguration(url: try UpstreamURL("ws://127.0.0.1:1/graphql"))
        configuration.httpURL = try httpURL.map { try HTTPURL($0) }
        return configuration
    }

    @Test func aWebSocketUpstreamIsOnePoolConnectionUntilTheCorePlacesOnTheNext() throws {
        let loop = EmbeddedEventLoop()
        let upstream = try carriers(try websocket(), on: loop)
        var snapshot = upstream.snapshotOnLoop
        #expect(snapshot.transport == "websocket")
        #expect(snapshot.url == "ws://127.0.0.1:1/graphql")
        #expect(snapshot.wire == "graphql-transport-ws")
        #expect(snapshot.connections.map(\.index) == [0])
        #expect(snapshot.streams == nil)
        #expect(snapshot.httpURL == nil)
        #expect(upstream.carrierName(at: .connection(0)) == "websocket")
        // No http_url, no streams: nothing carries those placements.
        #expect(upstream.carrierName(at: .http) == nil)
        #expect(upstream.carrierName(at: .stream) == nil)
        #expect(!upstream.openOnLoop(OperationID(1), kind: .query, payload: ByteBuffer(string: "{}"), on: .http))
        // Naming connection 2 makes connections 1 and 2.
        #expect(upstream.carrierName(at: .connection(2)) == "websocket")
        snapshot = upstream.snapshotOnLoop
        #expect(snapshot.connections.map(\.index) == [0, 1, 2])
        #expect(snapshot.connections.allSatisfy { $0.operations == 0 })
        _ = upstream.shutdownOnLoop()
        loop.run()
    }

    @Test func anHTTPStreamingUpstreamCarriesSubscriptionsOnStreamsAndSinglesOverHTTP() throws {
        let loop = EmbeddedEventLoop()
        var configuration = try websocket(httpURL: "http://127.0.0.1:1/graphql")
        configuration.carrier = .sse
        let upstream = try carriers(configuration, on: loop)
        let snapshot = upstream.snapshotOnLoop
        #expect(snapshot.transport == "sse")
        #expect(snapshot.url == "http://127.0.0.1:1/graphql")
        #expect(snapshot.wire == "sse")
        #expect(snapshot.streams == 0)
        #expect(snapshot.connections == [.init(index: 0, state: snapshot.state, operations: 0, wire: "sse")])
        #expect(upstream.carrierName(at: .stream) == "sse")
        #expect(upstream.carrierName(at: .http) == "http")
        _ = upstream.shutdownOnLoop()
        loop.run()
    }

    @Test func aReloadSetsAndUnsetsHTTPURLWithoutTouchingThePool() throws {
        let loop = EmbeddedEventLoop()
        let upstream = try carriers(try websocket(), on: loop)
        #expect(upstream.carrierName(at: .http) == nil)
        upstream.applyOnLoop(try PreparedUpstream(try websocket(httpURL: "http://127.0.0.1:1/graphql"), checkPayloadFile: false))
        #expect(upstream.carrierName(at: .http) == "http")
        #expect(upstream.snapshotOnLoop.httpURL == "http://127.0.0.1:1/graphql")
        upstream.applyOnLoop(try PreparedUpstream(try websocket(), checkPayloadFile: false))
        #expect(upstream.carrierName(at: .http) == nil)
        #expect(upstream.snapshotOnLoop.connections.count == 1)
        _ = upstream.shutdownOnLoop()
        loop.run()
    }

    /// The registry owns the one upstream `[upstream]` configures, by its name, and the fan-out's
    /// operations land on that upstream's carriers; its shutdown ends them all.
    @Test func theRegistryHoldsTheConfiguredUpstreamByNameAndPlacesOnItsCarriers() throws {
        let loop = EmbeddedEventLoop()
        let registry = UpstreamRegistry(try PreparedUpstream(try websocket(httpURL: "http://127.0.0.1:1/graphql"), checkPayloadFile: false), eventLoop: loop) {
            _,
            _ in
        }
        #expect(registry.names == [UpstreamRegistry.defaultName])
        #expect(registry.carriers(named: "default") === registry.primary)
        #expect(registry.carriers(named: "other") == nil)
        let operations: any UpstreamOperations = registry
        #expect(operations.carrierName(at: .connection(0), lane: .primary) == "websocket")
        #expect(operations.carrierName(at: .http, lane: .primary) == "http")
        #expect(operations.carrierName(at: .stream, lane: .primary) == nil)
        #expect(!operations.openOnLoop(OperationID(2), kind: .subscription, payload: ByteBuffer(string: "{}"), on: .stream, lane: .primary))
        #expect(registry.primary!.snapshotOnLoop.httpURL == "http://127.0.0.1:1/graphql")
        let done = registry.shutdownOnLoop()
        loop.run()
        #expect(throws: Never.self) { try done.wait() }
    }
}
