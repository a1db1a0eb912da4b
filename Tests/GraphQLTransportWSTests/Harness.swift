import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

/// Drives a ``TransportStateMachine`` on a manual clock and records what it asks for.
struct Harness {
    var machine: TransportStateMachine
    var now = Instant(nanoseconds: 0)
    var log: [TransportAction] = []
    /// The ids this harness gave its operations (the multiplexer core's role): 1, 2, 3, …
    private var lastOperation = 0

    init(_ configure: (inout TransportOptions) -> Void = { _ in }, random: Double = 0.5) {
        var options = TransportOptions()
        configure(&options)
        var uuidCounter = 0
        machine = TransportStateMachine(
            options: options,
            random: { random },
            makeUUID: {
                uuidCounter += 1
                return "uuid-\(uuidCounter)"
            }
        )
    }

    @discardableResult
    mutating func record(_ actions: [TransportAction]) -> [TransportAction] {
        log += actions
        return actions
    }

    /// Moves the clock forward and runs due timers.
    @discardableResult
    mutating func advance(ms: Int64) -> [TransportAction] {
        now = now + .milliseconds(ms)
        return record(machine.tick(now: now))
    }

    @discardableResult
    mutating func start() -> [TransportAction] { record(machine.start(now: now)) }

    /// Opens an operation under the next ``OperationID``; returns its wire id, which with the
    /// default `operation_ids = "sequential"` is that id's number ("1", "2", …).
    @discardableResult
    mutating func subscribe(_ kind: OperationKind = .subscription, _ query: String = "subscription { tick }") -> String {
        lastOperation += 1
        let id = OperationID(lastOperation)
        record(machine.subscribe(id: id, kind: kind, payload: ByteBuffer(string: #"{"query":"\#(query)"}"#), now: now))
        return machine.wireID(of: id) ?? id.description
    }

    /// The probation groups, by wire id.
    var probation: [[String]] { machine.probation.map { $0.map { machine.wireID(of: $0) ?? "?" } } }

    /// The generation of the last `connect` action.
    var lastGeneration: Int? {
        log.reversed().lazy.compactMap { if case .connect(let g) = $0 { g } else { nil } }.first
    }

    /// Completes the upgrade and the ack of the pending connect.
    @discardableResult
    mutating func connectAndAck(initPayload: ByteBuffer? = nil, protocol wire: WireProtocol = .transportWS) -> [TransportAction] {
        let gen = lastGeneration!
        var actions = record(machine.connectionOpened(generation: gen, initPayload: initPayload, protocol: wire, now: now))
        actions += receive(#"{"type":"connection_ack"}"#)
        return actions
    }

    @discardableResult
    mutating func receive(_ text: String) -> [TransportAction] {
        record(machine.received(generation: lastGeneration!, ByteBuffer(string: text), now: now))
    }

    @discardableResult
    mutating func serverClose(_ code: UInt16?, _ reason: String = "") -> [TransportAction] {
        record(machine.connectionClosed(generation: lastGeneration!, code: code.map { CloseCode($0) }, reason: reason, now: now))
    }
}

extension [TransportAction] {
    var sentTexts: [String] {
        compactMap { if case .send(_, let b) = $0 { String(buffer: b) } else { nil } }
    }
    var connects: Int { filter { if case .connect = $0 { true } else { false } }.count }
    var events: [TransportEvent] { compactMap { if case .event(let e) = $0 { e } else { nil } } }
    var states: [ConnectionState] { events.compactMap { if case .stateChanged(let s) = $0 { s } else { nil } } }
    /// The updates of the operation whose sequential wire id is `id` (its ``OperationID``).
    func updates(_ id: String) -> [OperationUpdate] {
        compactMap { if case .operation(let operation, let u) = $0, operation.description == id { u } else { nil } }
    }
    func operationStates(_ id: String) -> [OperationState] {
        updates(id).compactMap { if case .state(let s) = $0 { s } else { nil } }
    }
    func finish(_ id: String) -> OperationFinish? {
        updates(id).compactMap { if case .finished(let f) = $0 { f } else { nil } }.first
    }
    var closes: [UInt16] { compactMap { if case .close(_, let code, _) = $0 { code.code } else { nil } } }
    var aborts: Int { filter { if case .abort = $0 { true } else { false } }.count }
    var reconnectDelays: [Double] {
        states.compactMap { if case .reconnecting(_, let d, _) = $0 { d.seconds } else { nil } }
    }
}

/// The tests name operations by their wire id, as a server would.
extension TransportStateMachine {
    func state(of wireID: String) -> OperationState? { byWireID[wireID].flatMap { state(of: $0) } }

    mutating func complete(id wireID: String, now: Instant) -> [TransportAction] {
        guard let id = byWireID[wireID] else { return [] }
        return complete(id: id, now: now)
    }
}
