import NIOCore
import Testing

@testable import GraphQLTransportWS

/// Drives a ``TransportStateMachine`` on a manual clock and records what it asks for.
struct Harness {
    var machine: TransportStateMachine
    var now = Instant(nanoseconds: 0)
    var log: [TransportAction] = []

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

    @discardableResult
    mutating func subscribe(_ kind: OperationKind = .subscription, _ query: String = "subscription { tick }") -> String {
        let (id, actions) = machine.subscribe(kind: kind, payload: ByteBuffer(string: #"{"query":"\#(query)"}"#), now: now)
        record(actions)
        return id
    }

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
        record(machine.connectionClosed(generation: lastGeneration!, code: code, reason: reason, now: now))
    }
}

extension [TransportAction] {
    var sentTexts: [String] {
        compactMap { if case .send(_, let b) = $0 { String(buffer: b) } else { nil } }
    }
    var connects: Int { filter { if case .connect = $0 { true } else { false } }.count }
    var events: [TransportEvent] { compactMap { if case .event(let e) = $0 { e } else { nil } } }
    var states: [ConnectionState] { events.compactMap { if case .stateChanged(let s) = $0 { s } else { nil } } }
    func updates(_ id: String) -> [OperationUpdate] {
        compactMap { if case .operation(id, let u) = $0 { u } else { nil } }
    }
    func operationStates(_ id: String) -> [OperationState] {
        updates(id).compactMap { if case .state(let s) = $0 { s } else { nil } }
    }
    func finish(_ id: String) -> OperationFinish? {
        updates(id).compactMap { if case .finished(let f) = $0 { f } else { nil } }.first
    }
    var closes: [UInt16] { compactMap { if case .close(_, let code, _) = $0 { code } else { nil } } }
    var aborts: Int { filter { if case .abort = $0 { true } else { false } }.count }
    var reconnectDelays: [Double] {
        states.compactMap { if case .reconnecting(_, let d, _) = $0 { d.seconds } else { nil } }
    }
}
