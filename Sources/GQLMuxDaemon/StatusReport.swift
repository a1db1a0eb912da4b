import FoundationEssentials
import GQLMuxVocabulary
import JSONEnvelope
import NIOCore
import Upstream

/// The daemon at one instant, as operators see it: made on the loop in one step
/// (``Daemon/reportOnLoop``), then written as the `status` answer (docs/protocol.md), the
/// one-line `STATUS=` and the metrics' gauges, so the three never disagree.
struct StatusReport {
    /// One upstream of the table: its own lane's snapshot (the host's), or, for an upstream
    /// with an identity per client, each identity's.
    struct Upstream {
        var name: String
        /// `host`, `client` or `peer`.
        var identity: String
        /// The host lane's; for an identity upstream, its first identity's, else idle.
        var snapshot: UpstreamSnapshot
        /// Each identity's lane (its short name and snapshot); empty for `host`.
        var identities: [(name: String, snapshot: UpstreamSnapshot)] = []
        var localSubscriptions = 0
        var upstreamSubscriptions = 0
    }

    /// A lane's keep-alive health, in seconds (nil: not known yet): the last ping's round
    /// trip, the last gap between the server's keep-alives, the age of its last message.
    struct Health {
        var pingRTT: Double?
        var keepAliveGap: Double?
        var lastMessageAge: Double?
    }

    var version: String
    var upstream: UpstreamSnapshot
    /// Each lane's health by upstream and identity (``healthKey(upstream:identity:)``); only
    /// the `status` answer carries it.
    var health: [String: Health] = [:]

    static func healthKey(upstream: String, identity: String?) -> String { upstream + "\u{0}" + (identity ?? "host") }
    /// Every upstream, `default` first.
    var upstreams: [Upstream] = []
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
    /// - Parameter wholeURLs: upstream URLs as configured (an admin asks); otherwise without
    ///   query string and user info, where some servers take a key.
    func json(wholeURLs: Bool = false) -> ByteBuffer {
        var status = JSONObjectWriter()
        status.field("version", version)
        // What a server wrote in words (a close reason) about one identity's lane may name that
        // identity's credential or user: only an admin reads it.
        let defaultServerText = wholeURLs || (upstreams.first?.identity ?? "host") == "host"
        status.field("upstream") { Self.write(upstream, wholeURLs: wholeURLs, serverText: defaultServerText, to: &$0) }
        status.field("upstreams") { table in
            for entry in upstreams {
                table.field(entry.name) { object in
                    Self.write(entry.snapshot, wholeURLs: wholeURLs, serverText: wholeURLs || entry.identity == "host", to: &object)
                    object.field("identity", entry.identity)
                    if entry.identity == "host" { Self.write(health[Self.healthKey(upstream: entry.name, identity: nil)], to: &object) }
                    object.field("subscriptions") { subscriptions in
                        subscriptions.field("local", entry.localSubscriptions)
                        subscriptions.field("upstream", entry.upstreamSubscriptions)
                    }
                    if entry.identity != "host" {
                        object.field(
                            "identities",
                            objects: entry.identities.map { identity in
                                { item in
                                    item.field("id", identity.name)
                                    item.field("state", identity.snapshot.state.name.rawValue)
                                    item.field("connections", identity.snapshot.connections.count)
                                    item.field("reconnects", identity.snapshot.reconnects)
                                    Self.write(health[Self.healthKey(upstream: entry.name, identity: identity.name)], to: &item)
                                }
                            }
                        )
                    }
                }
            }
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

    private static func write(_ health: Health?, to object: inout JSONObjectWriter) {
        object.field("pingRTT", number: health?.pingRTT, decimals: 6)
        object.field("keepAliveGap", number: health?.keepAliveGap)
        object.field("lastMessageAge", number: health?.lastMessageAge)
    }

    private static func write(_ upstream: UpstreamSnapshot, wholeURLs: Bool, serverText: Bool, to object: inout JSONObjectWriter) {
        object.field("state", upstream.state.name.rawValue)
        object.field("url", wholeURLs ? upstream.url : Self.shown(upstream.url))
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
                    connection.field("detail", Self.describe(c.state, serverText: serverText))
                }
            }
        )
        object.field("httpURL", wholeURLs ? upstream.httpURL : upstream.httpURL.map(Self.shown))
        object.field("reconnects", upstream.reconnects)
        if let streams = upstream.streams { object.field("streams", streams) }
        object.field("detail", Self.describe(upstream.state, serverText: serverText))
    }

    /// `url` as every local user may see it (``shownURL(_:)``).
    static func shown(_ url: String) -> String { shownURL(url) }

    /// The one-line status (sd_notify `STATUS=`), with the last reload's failure if any.
    var line: String {
        guard let reloadError else { return connectionLine }
        return connectionLine + "; last reload failed (configuration kept): " + reloadError
    }

    private var connectionLine: String {
        guard upstreams.count < 2 else { return tableLine }
        guard upstream.state == .connected else {
            return Self.describe(upstream.state, serverText: (upstreams.first?.identity ?? "host") == "host")
        }
        let count = upstream.connections.count
        let over = count > 1 ? " over \(count) connections" : ""
        let transport = upstream.streams == nil ? "" : " (\(upstream.transport))"
        return
            "connected to \(Self.shown(upstream.url))\(transport); \(clients) clients, \(localSubscriptions) subscriptions (\(upstreamSubscriptions) upstream\(over))"
    }

    /// Several upstreams: how many are in each state, then each one's name and state.
    private var tableLine: String {
        var counts: [(String, Int)] = []
        for entry in upstreams {
            let word = entry.snapshot.state.name.rawValue
            if let index = counts.firstIndex(where: { $0.0 == word }) { counts[index].1 += 1 } else { counts.append((word, 1)) }
        }
        let summary = counts.map { "\($0.1) \($0.0)" }.joined(separator: ", ")
        let each = upstreams.map { "\($0.name) \($0.snapshot.state.name.rawValue)" }.joined(separator: ", ")
        return "\(upstreams.count) upstreams: \(summary); \(each); \(clients) clients, \(localSubscriptions) subscriptions (\(upstreamSubscriptions) upstream)"
    }

    /// A connection state in operators' words; without `serverText`, without what the server
    /// wrote in words (``DisconnectCause/withoutServerText``).
    static func describe(_ state: ConnectionState, serverText: Bool = true) -> String {
        switch state {
        case .idle: return "idle (lazy: connects on first subscribe)"
        case .connecting(let attempt), .awaitingAck(let attempt): return "connecting (attempt \(attempt))"
        case .connected: return "connected"
        case .reconnecting(let attempt, let delay, let cause):
            return "reconnecting in \(delay.formattedSeconds(decimals: 1))s (attempt \(attempt)): \(serverText ? cause.description : cause.withoutServerText)"
        case .paused: return "paused"
        case .failed(let code, let reason):
            return "failed: " + (code.map { "upstream closed \($0)" + (serverText ? " \(reason)" : "") } ?? reason) + "; waiting for reload"
        case .shutDown: return "stopping"
        }
    }
}
