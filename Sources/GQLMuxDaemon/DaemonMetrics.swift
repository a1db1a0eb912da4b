import GQLMuxVocabulary
import GraphQLTransportWS
import LocalProtocol
import Prometheus
import Upstream

/// The daemon's metrics (docs/metrics.md) in a registry of its own, so that several daemons
/// in one process (the tests) never mix their series.
///
/// swift-prometheus's registry is used directly rather than through swift-metrics' API: that API
/// carries no help text, `promtool check metrics` fails an exposition without `# HELP` (exit 3,
/// "no help text"), and the registry stops the process when one family is made both with and
/// without help. The registry still writes the text; nothing here formats it by hand.
///
/// Rare events (reconnects, errors, slow-consumer cuts) move their counters when they happen.
/// What the hot path already counts (messages in, deliveries out) and the gauges are brought
/// up to date when the text is rendered, so a delivery costs no atomic operation. Lives on the
/// daemon's event loop, like the daemon.
final class DaemonMetrics {
    /// The `code` labels of `gqlmux_errors_total`, pre-registered at 0 so rates work from the
    /// start: every local error code, and `upstream` for GraphQL `error` messages passed
    /// through from the server.
    static let errorLabels = LocalErrorCode.allCases.map(\.rawValue) + ["upstream"]

    let registry = PrometheusCollectorRegistry()
    private let localSubscriptions: Gauge
    private let upstreamSubscriptions: Gauge
    private let clients: Gauge
    private var streamGauges: [String: Gauge] = [:]
    private let messagesReceived: Counter
    private let deliveries: Counter
    private let slowConsumers: Counter
    private let reconnectDuration: DurationHistogram
    /// `gqlmux_upstream_ping_rtt_seconds{upstream}`, made as upstreams answer a ping.
    private var pingRoundTrips: [String: DurationHistogram] = [:]
    private var exportedIn = 0
    private var exportedDeliveries = 0
    /// When each acknowledged connection was lost, until its next ack.
    private var lostAt: [ConnectionKey: ContinuousClock.Instant] = [:]
    private struct ConnectionKey: Hashable {
        let lane: LaneID
        let connection: Int
    }
    /// `gqlmux_upstream_connections{upstream, state}`, made as upstreams appear.
    private var connectionGauges: [String: [ConnectionStateName: Gauge]] = [:]

    init() {
        let subscriptionsHelp = "Live subscriptions: local (one per client operation) and upstream (after dedup)"
        localSubscriptions = registry.makeGauge(descriptor: Self.describe("gqlmux_subscriptions", subscriptionsHelp), labels: [("side", "local")])
        upstreamSubscriptions = registry.makeGauge(descriptor: Self.describe("gqlmux_subscriptions", subscriptionsHelp), labels: [("side", "upstream")])
        clients = registry.makeGauge(descriptor: Self.describe("gqlmux_clients", "Connected local clients"))
        messagesReceived = registry.makeCounter(
            descriptor: Self.describe("gqlmux_messages_received_total", "Subscription results (next) received from the upstream")
        )
        deliveries = registry.makeCounter(descriptor: Self.describe("gqlmux_deliveries_total", "Subscription results written to local clients"))
        slowConsumers = registry.makeCounter(
            descriptor: Self.describe(
                "gqlmux_slow_consumer_disconnects_total",
                "Local clients cut for falling behind (client_buffer_bytes or total_buffer_bytes)"
            )
        )
        reconnectDuration = registry.makeDurationHistogram(
            descriptor: Self.describe("gqlmux_reconnect_duration_seconds", "Time from losing the upstream connection to the next connection_ack"),
            buckets: [
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
                .seconds(300),
            ]
        )
        for label in Self.errorLabels { _ = errorCounter(label) }
        for listener in Self.listenerLabels {
            for reason in Self.refusalLabels where listener != "line" || reason == "listener_full" { _ = refusalCounter(listener, reason) }
        }
    }

    /// The `listener` and `reason` labels of `gqlmux_refused_total`, pre-registered at 0.
    static let listenerLabels = ["line", "endpoint", "endpoint-tcp"]
    static let refusalLabels = ["foreign_origin", "foreign_host", "missing_host", "unauthorized", "timeout", "listener_full"]

    private func refusalCounter(_ listener: String, _ reason: String) -> Counter {
        registry.makeCounter(
            descriptor: Self.describe(
                "gqlmux_refused_total",
                "Connections and requests refused at a listener's door, by listener and reason (browser checks, token, timeouts, connection limit)"
            ),
            labels: [("listener", listener), ("reason", reason)]
        )
    }

    /// A request or connection was refused at `listener` for `reason` (one of ``refusalLabels``).
    func refused(listener: String, reason: String) {
        refusalCounter(listener, reason).increment()
    }

    private func errorCounter(_ code: String) -> Counter {
        registry.makeCounter(
            descriptor: Self.describe("gqlmux_errors_total", "error messages sent to local clients, by code (upstream: GraphQL errors passed through)"),
            labels: [("code", code)]
        )
    }

    // MARK: - Events

    /// An `error` line was sent to `count` local operations or clients: a local error code, or
    /// nil for the server's own GraphQL errors.
    func errorSent(_ code: LocalErrorCode?, count: Int = 1) {
        errorCounter(code?.rawValue ?? "upstream").increment(by: Int64(count))
    }

    func slowConsumerCut() { slowConsumers.increment() }

    /// Upstream `upstream` answered a keep-alive `ping` after `roundTrip`.
    func pingAnswered(upstream: String, after roundTrip: Duration) {
        let histogram =
            pingRoundTrips[upstream]
            ?? registry.makeDurationHistogram(
                descriptor: Self.describe(
                    "gqlmux_upstream_ping_rtt_seconds",
                    "Round-trip time of the keep-alive ping (graphql-transport-ws ping to pong; graphql-ws: a WebSocket ping frame to its pong frame), by upstream"
                ),
                labels: [("upstream", upstream)],
                buckets: [
                    .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                    .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
                ]
            )
        pingRoundTrips[upstream] = histogram
        histogram.record(roundTrip)
    }

    /// A reconnect was scheduled for `cause`: its labels come from the typed cause.
    func reconnectScheduled(cause: DisconnectCause) {
        registry.makeCounter(
            descriptor: Self.describe("gqlmux_reconnects_total", "Reconnects scheduled, by cause and close code (none: no WebSocket was open)"),
            labels: [("cause", cause.metricLabel), ("close_code", cause.closeCode?.description ?? "none")]
        ).increment()
    }

    func connectionLost(lane: LaneID, connection: Int, at now: ContinuousClock.Instant) {
        let key = ConnectionKey(lane: lane, connection: connection)
        if lostAt[key] == nil { lostAt[key] = now }
    }

    func reconnected(lane: LaneID, connection: Int, at now: ContinuousClock.Instant) {
        guard let since = lostAt.removeValue(forKey: ConnectionKey(lane: lane, connection: connection)) else { return }
        reconnectDuration.record(now - since)
    }

    // MARK: - Rendering

    /// The Prometheus text exposition (format 0.0.4) of everything, as of `snapshot` (the same
    /// value `status` and `STATUS=` are written from).
    func render(_ snapshot: StatusReport) -> [UInt8] {
        clients.set(Int64(snapshot.clients))
        localSubscriptions.set(Int64(snapshot.localSubscriptions))
        upstreamSubscriptions.set(Int64(snapshot.upstreamSubscriptions))
        var named = Set<String>()
        for entry in snapshot.upstreams {
            named.insert(entry.name)
            let lanes = entry.identity == "host" ? [entry.snapshot] : entry.identities.map(\.snapshot)
            for (state, gauge) in connectionGauges(entry.name) {
                var count = 0
                for lane in lanes { count += lane.connections.filter { $0.state.name == state }.count }
                gauge.set(Int64(count))
            }
            let streams = lanes.compactMap(\.streams)
            if !streams.isEmpty {
                let key = entry.name + "\u{0}" + entry.snapshot.transport
                let gauge =
                    streamGauges[key]
                    ?? registry.makeGauge(
                        descriptor: Self.describe("gqlmux_upstream_streams", "Open upstream HTTP streams (multipart or SSE), one per distinct subscription"),
                        labels: [("transport", entry.snapshot.transport), ("upstream", entry.name)]
                    )
                streamGauges[key] = gauge
                gauge.set(Int64(streams.reduce(0, +)))
            }
        }
        // An upstream a reload removed shows no connection.
        for (name, gauges) in connectionGauges where !named.contains(name) {
            for gauge in gauges.values { gauge.set(Int64(0)) }
        }
        messagesReceived.increment(by: Int64(snapshot.messagesIn - exportedIn))
        exportedIn = snapshot.messagesIn
        deliveries.increment(by: Int64(snapshot.messagesOut - exportedDeliveries))
        exportedDeliveries = snapshot.messagesOut
        return registry.emitToBuffer()
    }

    /// Every state an upstream's connections can be in gets a series, 0 or more.
    private func connectionGauges(_ upstream: String) -> [ConnectionStateName: Gauge] {
        if let gauges = connectionGauges[upstream] { return gauges }
        var gauges: [ConnectionStateName: Gauge] = [:]
        for state in ConnectionStateName.allCases {
            gauges[state] = registry.makeGauge(
                descriptor: Self.describe(
                    "gqlmux_upstream_connections",
                    "Upstream connections by upstream and state (an HTTP streaming upstream counts as one)"
                ),
                labels: [("state", state.rawValue), ("upstream", upstream)]
            )
        }
        connectionGauges[upstream] = gauges
        return gauges
    }

    private static func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// `Content-Type` of the exposition.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}
