import Foundation
// Every file of this test target sees the shared helpers (until, eventually, repositoryRoot,
// ChildProcess) through this one import.
@_exported import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TestUpstream
import Testing

@testable import Upstream

/// Collects what a transport reports, from its event loop, for assertions. It stands in for
/// the multiplexer core: it names each operation (an ``OperationID`` per key) and is the
/// transport's sink.
final class Recorder: Changing {
    let changes = Changes()
    private struct State {
        var events: [TransportEvent] = []
        var updates: [String: [OperationUpdate]] = [:]
        var keys: [OperationID: String] = [:]
        var lastID = 0
    }
    private let box = NIOLockedValueBox(State())

    var events: [TransportEvent] { box.withLockedValue { $0.events } }
    func updates(_ id: String) -> [OperationUpdate] { box.withLockedValue { $0.updates[id] ?? [] } }

    func observe(_ event: TransportEvent) {
        box.withLockedValue { $0.events.append(event) }
        changes.changed()
    }
    /// Where the operations opened under `key` report.
    func handler(for key: String) -> Route { Route(recorder: self, key: key) }

    /// A new operation id whose updates are kept under `key`.
    func track(_ key: String) -> OperationID {
        box.withLockedValue { state in
            state.lastID += 1
            state.keys[OperationID(state.lastID)] = key
            return OperationID(state.lastID)
        }
    }

    /// The transport's sink.
    var sink: OperationSink {
        { id, update in
            self.box.withLockedValue { state in
                guard let key = state.keys[id] else { return }
                state.updates[key, default: []].append(update)
            }
            self.changes.changed()
        }
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

/// An operation's key in a ``Recorder``.
struct Route: Sendable {
    let recorder: Recorder
    let key: String
}

extension UpstreamTransport {
    /// Opens an operation whose updates `route`'s recorder keeps under its key (the recorder is
    /// this transport's sink); returns its wire id.
    func subscribe(kind: OperationKind, payload: ByteBuffer, handler route: Route) -> EventLoopFuture<String> {
        let id = route.recorder.track(route.key)
        return eventLoop.submit { self.updates = route.recorder.sink }.flatMap { self.open(id, kind: kind, payload: payload) }
    }

    /// Completes the operation with sequential wire id `id`.
    func complete(id: String) { complete(OperationID(Int(id)!)) }
}

/// Ids for operations sent straight to an ``HTTPOperations`` (no recorder).
private let httpOperationIDs = NIOLockedValueBox(0)

extension HTTPOperations {
    /// Sends a request under a fresh id; its result goes nowhere.
    func sendOnLoop(payload: ByteBuffer, handler: (OperationUpdate) -> Void) -> OperationID {
        let id = OperationID(
            httpOperationIDs.withLockedValue {
                $0 += 1; return $0
            }
        )
        sendOnLoop(id, payload: payload)
        return id
    }

    func cancelOnLoop(id: OperationID) { cancelOnLoop(id) }
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

/// Lets a test match a close code by its number in a pattern.
func ~= (pattern: UInt16, value: CloseCode?) -> Bool { value?.code == pattern }
