import Foundation
@_exported import GQLMuxTestSupport
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TestUpstream
import Testing

@testable import Upstream

/// Collects what a transport reports, from its event loop, for assertions.
final class Recorder: Sendable {
    private let box = NIOLockedValueBox<(events: [TransportEvent], updates: [String: [OperationUpdate]])>(([], [:]))

    var events: [TransportEvent] { box.withLockedValue { $0.events } }
    func updates(_ id: String) -> [OperationUpdate] { box.withLockedValue { $0.updates[id] ?? [] } }

    func observe(_ event: TransportEvent) { box.withLockedValue { $0.events.append(event) } }
    func handler(for key: String) -> OperationHandler {
        { update in self.box.withLockedValue { $0.updates[key, default: []].append(update) } }
    }

    func nexts(_ key: String) -> [String] {
        updates(key).compactMap { if case .next(let b) = $0 { String(buffer: b) } else { nil } }
    }
    func states(_ key: String) -> [OperationState] {
        updates(key).compactMap { if case .state(let s) = $0 { s } else { nil } }
    }
    func finish(_ key: String) -> OperationFinish? {
        updates(key).compactMap { if case .finished(let f) = $0 { f } else { nil } }.first
    }
    var connectionStates: [ConnectionState] {
        events.compactMap { if case .stateChanged(let s) = $0 { s } else { nil } }
    }
    func count(_ event: TransportEvent) -> Int { events.filter { $0 == event }.count }
}

/// A test upstream, a transport on a loop of its own, and a recorder, torn down together.
struct Rig {
    let server: TestUpstreamServer
    let transport: UpstreamTransport
    let recorder: Recorder
    let group: MultiThreadedEventLoopGroup

    static func make(
        server options: TestUpstreamServer.Options = .init(),
        _ configure: (inout UpstreamConfiguration) -> Void = { _ in }
    ) async throws -> Rig {
        let server = TestUpstreamServer(options: options)
        try await server.start()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = UpstreamConfiguration(url: try UpstreamURL(server.url))
        configuration.transport.backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0.2)
        configure(&configuration)
        let recorder = Recorder()
        let transport = try UpstreamTransport(
            configuration: configuration,
            eventLoop: group.next(),
            observer: { recorder.observe($0) }
        )
        return Rig(server: server, transport: transport, recorder: recorder, group: group)
    }

    /// Makes a rig, runs `body` with it, and always tears it down, even when `body` throws.
    static func with(
        server options: TestUpstreamServer.Options = .init(),
        configure: (inout UpstreamConfiguration) -> Void = { _ in },
        _ body: (Rig) async throws -> Void
    ) async throws {
        try await scoped(try await make(server: options, configure), tearDown: { await $0.tearDown() }, body)
    }

    func tearDown() async {
        try? await transport.shutdown().get()
        await server.shutdown()
        try? await group.shutdownGracefully()
    }
}

extension Rig {
    /// Subscribes with the recorder keyed by `key`, returns the upstream id.
    @discardableResult
    func subscribe(key: String, _ query: String = "subscription { tick }", kind: OperationKind = .subscription) async throws -> String {
        let payload = ByteBuffer(string: #"{"query":\#(jsonString(query))}"#)
        return try await transport.subscribe(kind: kind, payload: payload, handler: recorder.handler(for: key)).get()
    }
}
