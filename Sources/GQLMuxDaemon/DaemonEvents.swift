/// A structured event of the daemon, with the name journald gets as `GQLMUX_EVENT=`.
package enum DaemonEvent: String, Sendable, CaseIterable {
    case started, connecting, connected, reconnected, disconnected, reconnecting, failed, paused, resumed
    case reloaded, reloadFailed = "reload_failed", stopping
    case ping, pong
    case subscribed, completed, operationError = "operation_error"
    case clientConnected = "client_connected", clientDisconnected = "client_disconnected"
    case clientRefused = "client_refused", clientProtocolError = "client_protocol_error"
    case slowConsumer = "slow_consumer", limitExceeded = "limit_exceeded"
    case quarantined, memoryBudget = "memory_budget"
    case listening, requestRefused = "request_refused", unauthorized, acceptFailed = "accept_failed", requestTimeout = "request_timeout"
    case protocolFallback = "protocol_fallback"
    case handedOver = "handed_over", handoverFailed = "handover_failed", adopted, handoverUnreadable = "handover_unreadable"

    /// The fixed journald `MESSAGE_ID` of this event; `systemd/gqlmuxd.catalog` explains each.
    package var messageID: String {
        switch self {
        case .started: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a01"
        case .connecting: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a02"
        case .connected: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a03"
        case .reconnected: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a04"
        case .disconnected: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a05"
        case .reconnecting: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a06"
        case .failed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a07"
        case .paused: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a08"
        case .resumed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a09"
        case .reloaded: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0a"
        case .reloadFailed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0b"
        case .stopping: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0c"
        case .ping: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0d"
        case .pong: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0e"
        case .subscribed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a0f"
        case .completed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a10"
        case .operationError: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a11"
        case .clientConnected: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a12"
        case .clientDisconnected: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a13"
        case .clientRefused: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a14"
        case .clientProtocolError: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a15"
        case .slowConsumer: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a16"
        case .limitExceeded: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a17"
        case .quarantined: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a18"
        case .memoryBudget: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a19"
        case .listening: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1a"
        case .requestRefused: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1b"
        case .unauthorized: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1c"
        case .acceptFailed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1d"
        case .requestTimeout: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1e"
        case .protocolFallback: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a1f"
        case .handedOver: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a20"
        case .handoverFailed: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a21"
        case .adopted: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a22"
        case .handoverUnreadable: "5b0c4a0f6d2e4e8f9a3b1c7d2e6f8a23"
        }
    }

    /// How loud the event is (ping and pong are debug).
    package var severity: Severity {
        switch self {
        case .ping, .pong: .debug
        case .connecting, .subscribed, .completed, .clientConnected, .clientDisconnected, .requestTimeout: .info
        case .listening, .started, .connected, .reconnected, .paused, .resumed, .reloaded, .stopping, .handedOver, .adopted: .notice
        case .disconnected, .reconnecting, .reloadFailed, .operationError, .clientRefused, .clientProtocolError,
            .slowConsumer, .limitExceeded, .quarantined, .memoryBudget, .requestRefused, .unauthorized, .acceptFailed, .protocolFallback,
            .handoverFailed, .handoverUnreadable:
            .warning
        case .failed: .error
        }
    }

    package enum Severity: Sendable { case debug, info, notice, warning, error }
}

/// Where the daemon's events go: a journald/stderr logger in production, a recorder in tests.
/// Fields never carry secrets (payloads, headers, token files).
package struct DaemonEvents: Sendable {
    package struct Source: Sendable {
        package var file: String
        package var function: String
        package var line: UInt
    }

    package typealias Sink = @Sendable (DaemonEvent, String, [String: String], Source) -> Void
    private let sink: Sink

    package init(_ sink: @escaping Sink) { self.sink = sink }

    /// A sink that ignores the source location.
    package init(_ sink: @escaping @Sendable (DaemonEvent, String, [String: String]) -> Void) {
        self.sink = { event, message, fields, _ in sink(event, message, fields) }
    }

    /// The same sink, with `fields` added to every event (`GQLMUX_CONNECTION` for one upstream
    /// connection's events).
    package func adding(_ fields: [String: String]) -> DaemonEvents {
        let sink = self.sink
        return DaemonEvents { event, message, own, source in sink(event, message, own.merging(fields) { mine, _ in mine }, source) }
    }

    package func emit(
        _ event: DaemonEvent,
        _ fields: [String: String] = [:],
        message: String? = nil,
        file: String = #fileID,
        function: String = #function,
        line: UInt = #line
    ) {
        sink(event, message ?? event.rawValue.replacing("_", with: " "), fields, Source(file: file, function: function, line: line))
    }
}
