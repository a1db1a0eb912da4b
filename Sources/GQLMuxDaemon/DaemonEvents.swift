import Foundation

/// A structured event of the daemon, with the name journald gets as `GQLMUX_EVENT=`.
package enum DaemonEvent: String, Sendable, CaseIterable {
    case started, connecting, connected, reconnected, disconnected, reconnecting, failed, paused, resumed
    case reloaded, reloadFailed = "reload_failed", stopping
    case ping, pong
    case subscribed, completed, operationError = "operation_error"
    case clientConnected = "client_connected", clientDisconnected = "client_disconnected"
    case clientRefused = "client_refused", clientProtocolError = "client_protocol_error"
    case slowConsumer = "slow_consumer", limitExceeded = "limit_exceeded"

    /// Ping and pong are chatty: logged at debug level.
    package var isDebug: Bool { self == .ping || self == .pong }
}

/// Where the daemon's events go: a log handler in production, a recorder in tests.
package struct DaemonEvents: Sendable {
    package typealias Sink = @Sendable (DaemonEvent, String, [String: String]) -> Void
    private let sink: Sink

    package init(_ sink: @escaping Sink) { self.sink = sink }

    /// Plain lines on stderr: `gqlmuxd: connected: ... KEY=value`.
    package static let stderr = DaemonEvents { event, message, fields in
        let extra = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let line = "gqlmuxd: \(event.rawValue): \(message)" + (extra.isEmpty ? "" : " \(extra)") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    package func emit(_ event: DaemonEvent, _ fields: [String: String] = [:], message: String? = nil) {
        sink(event, message ?? event.rawValue.replacingOccurrences(of: "_", with: " "), fields)
    }
}
