import FoundationEssentials
import GQLMuxVocabulary
import JSONEnvelope
import NIOCore
import Upstream

/// The daemon at one instant, as operators see it: made on the loop in one step
/// (``Daemon/reportOnLoop``), then written as the `status` answer (docs/protocol.md), the
/// one-line `STATUS=` and the metrics' gauges, so the three never disagree.
struct StatusReport {
    var version: String
    var upstream: UpstreamSnapshot
    /// The last reload's error, until a reload succeeds.
    var reloadError: String?
    /// Where `GET /metrics` is served (`[metrics] listen`).
    var metricsAddress: String?
    /// The GraphQL endpoint's listeners.
    var endpointAddresses: [String]
    var clients: Int
    var localSubscriptions: Int
    var upstreamSubscriptions: Int
    var messagesIn: Int
    var messagesOut: Int
    /// The memory budget: bytes waiting for clients, of requests not yet whole, of latest
    /// results kept for replays, and the limit.
    var bufferedOutbound: Int
    var bufferedInbound: Int
    /// Latest results kept for replays (`replayLast`).
    var retained: Int
    var bufferLimit: Int

    /// The `status` answer: at least upstream.state, upstream.url, upstream.reconnects,
    /// clients, subscriptions.local/upstream, messages.in/out.
    func json() -> ByteBuffer {
        var status = JSONObjectWriter()
        status.field("version", version)
        status.field("upstream") { object in
            object.field("state", upstream.state.name.rawValue)
            object.field("url", upstream.url)
            object.field("transport", upstream.transport)
            object.field("protocol", upstream.wire)
            object.field(
                "connections",
                objects: upstream.connections.map { c in
                    { connection in
                        connection.field("id", c.index)
                        connection.field("state", c.state.name.rawValue)
                        connection.field("operations", c.operations)
                        connection.field("protocol", c.wire)
                        connection.field("detail", Self.describe(c.state))
                    }
                }
            )
            object.field("httpURL", upstream.httpURL)
            object.field("reconnects", upstream.reconnects)
            if let streams = upstream.streams { object.field("streams", streams) }
            object.field("detail", Self.describe(upstream.state))
        }
        status.field("reloadError", reloadError)
        status.field("metrics", metricsAddress)
        status.field("graphqlEndpoint", endpointAddresses.isEmpty ? nil : endpointAddresses.joined(separator: " "))
        status.field("clients", clients)
        status.field("subscriptions") { subscriptions in
            subscriptions.field("local", localSubscriptions)
            subscriptions.field("upstream", upstreamSubscriptions)
        }
        status.field("messages") { messages in
            messages.field("in", messagesIn)
            messages.field("out", messagesOut)
        }
        status.field("buffers") { buffers in
            buffers.field("outbound", bufferedOutbound)
            buffers.field("inbound", bufferedInbound)
            buffers.field("retained", retained)
            buffers.field("limit", bufferLimit)
        }
        return status.finish()
    }

    /// The one-line status (sd_notify `STATUS=`), with the last reload's failure if any.
    var line: String {
        guard let reloadError else { return connectionLine }
        return connectionLine + "; last reload failed (configuration kept): " + reloadError
    }

    private var connectionLine: String {
        guard upstream.state == .connected else { return Self.describe(upstream.state) }
        let count = upstream.connections.count
        let over = count > 1 ? " over \(count) connections" : ""
        let transport = upstream.streams == nil ? "" : " (\(upstream.transport))"
        return "connected to \(upstream.url)\(transport); \(clients) clients, \(localSubscriptions) subscriptions (\(upstreamSubscriptions) upstream\(over))"
    }

    /// A connection state in operators' words.
    static func describe(_ state: ConnectionState) -> String {
        switch state {
        case .idle: return "idle (lazy: connects on first subscribe)"
        case .connecting(let attempt), .awaitingAck(let attempt): return "connecting (attempt \(attempt))"
        case .connected: return "connected"
        case .reconnecting(let attempt, let delay, let cause):
            return "reconnecting in \(delay.formattedSeconds(decimals: 1))s (attempt \(attempt)): \(cause)"
        case .paused: return "paused"
        case .failed(let code, let reason):
            return "failed: " + (code.map { "upstream closed \($0) \(reason)" } ?? reason) + "; waiting for reload"
        case .shutDown: return "stopping"
        }
    }
}
