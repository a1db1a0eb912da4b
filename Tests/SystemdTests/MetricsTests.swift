import Foundation
import TestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 10, day two: metrics in the format operators scrape. The real gqlmuxd serves them on
/// `[metrics] listen`, the `metrics` verb and `gqlmuxctl metrics`; Debian's `promtool` checks
/// the exposition and a real Prometheus (started here on a loopback port) scrapes it.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetricsTests {
    @Test func aRealPrometheusScrapesTheDaemonAndPromtoolAcceptsTheExposition() async throws {
        let prometheusBinary = try #require(Paths.tool("prometheus"), "Debian's prometheus package (scripts/prerequisites.sh test)")
        let promtool = try #require(Paths.tool("promtool"), "Debian's prometheus package (scripts/prerequisites.sh test)")
        let server = TestUpstreamServer()
        try await server.start()
        await server.setOptions { $0.tickInterval = nil }
        let daemon = try await DaemonProcess.start(upstream: server.url, extraConfig: "[metrics]\nlisten = \"127.0.0.1:0\"", prefix: "gqlmux-metrics")
        defer { daemon.child.signal(SIGKILL) }
        let socket = daemon.socket
        let directory = daemon.directory
        let ctl = Paths.binary("gqlmuxctl")

        // The port the daemon chose ("127.0.0.1:0") is in `status`.
        let status = try await runCommand(ctl, ["status", "--json", "--socket", socket])
        let statusObject = try #require(try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])
        let address = try #require(statusObject["metrics"] as? String, "status names the metrics address: \(status.output)")
        let port = try #require(Int(address.split(separator: ":").last ?? ""))

        // Three local subscribers, two distinct documents: 3 local, 2 upstream (dedup reads 1.5).
        let subscribers = try [
            Child(ctl, ["subscribe", "subscription { tick }", "--socket", socket]),
            Child(ctl, ["subscribe", "subscription { tick }", "--socket", socket]),
            Child(ctl, ["subscribe", "subscription Other { tick }", "--socket", socket]),
        ]
        defer { for subscriber in subscribers { subscriber.signal(SIGKILL) } }
        await until("2 upstream subscriptions", upstream: server) { $0.activeSubscriptions == 2 }
        // The identical subscriber joins without an upstream change: wait for the daemon to count it.
        await eventually("3 local subscriptions") {
            let status = try? await runCommand(ctl, ["status", "--json", "--socket", socket])
            return status?.output.contains(#""subscriptions":{"local":3,"upstream":2}"#) == true
        }
        for _ in 0..<5 { _ = await server.tick() }
        await eventually("5 results each") {
            subscribers.allSatisfy { $0.stdout.split(separator: "\n").count == 5 }
        }
        // A refused request counts under its code.
        let invalid = try await runCommand(ctl, ["query", "{ hello ", "--socket", socket])
        #expect(invalid.status == 1)

        // The status and query clients above leave asynchronously: scrape once they are gone.
        var scraped: (status: Int, body: String)?
        await eventually("3 clients in the scrape") {
            scraped = httpGet(port: port, "/metrics")
            return scraped.map { sample($0.body, "gqlmux_clients") == 3 } ?? false
        }
        #expect(scraped?.status == 200)
        let text = try #require(scraped?.body)
        #expect(sample(text, #"gqlmux_subscriptions{side="local"}"#) == 3)
        #expect(sample(text, #"gqlmux_subscriptions{side="upstream"}"#) == 2)
        #expect(sample(text, "gqlmux_clients") == 3)
        #expect(sample(text, #"gqlmux_upstream_connections{state="connected",upstream="default"}"#) == 1)
        #expect(sample(text, #"gqlmux_upstream_connections{state="reconnecting",upstream="default"}"#) == 0)
        #expect(sample(text, "gqlmux_messages_received_total") == 10)
        #expect(sample(text, "gqlmux_deliveries_total") == 15)
        #expect(sample(text, #"gqlmux_errors_total{code="INVALID_DOCUMENT"}"#) == 1)
        #expect(sample(text, "gqlmux_slow_consumer_disconnects_total") == 0)
        #expect(text.contains("# TYPE gqlmux_reconnect_duration_seconds histogram"))
        #expect(httpGet(port: port, "/")?.status == 404)

        // The same series through the local verb and gqlmuxctl.
        let viaVerb = try await runCommand(ctl, ["metrics", "--socket", socket])
        #expect(viaVerb.status == 0)
        #expect(sample(viaVerb.output, #"gqlmux_subscriptions{side="upstream"}"#) == 2)
        let asJSON = try await runCommand(ctl, ["metrics", "--json", "--socket", socket])
        #expect(asJSON.output.contains(#"{"labels":{"side":"local"},"name":"gqlmux_subscriptions","value":3}"#))

        // promtool's own checks (syntax and lint) pass on the exposition.
        try text.write(toFile: directory + "/metrics.txt", atomically: true, encoding: .utf8)
        let check = try await runCommand("/bin/sh", ["-c", "\(promtool) check metrics < \(directory)/metrics.txt"])
        #expect(check.status == 0, "promtool: \(check.output)")

        // A real Prometheus scrapes it every second; its query API sees our series.
        let reservation = try PortReservation()  // Prometheus binds with SO_REUSEADDR
        let prometheusPort = reservation.port
        try """
        global:
          scrape_interval: 1s
        scrape_configs:
          - job_name: gqlmux
            static_configs:
              - targets: ['127.0.0.1:\(port)']
        """.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheus = try Child(
            prometheusBinary,
            [
                "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
                "--web.listen-address=127.0.0.1:\(prometheusPort)",
            ]
        )
        defer { prometheus.signal(SIGKILL) }
        var series: [String: Double] = [:]
        await eventually("Prometheus scraped gqlmux_subscriptions", within: 60) {
            series = Self.query(prometheusPort, "gqlmux_subscriptions", label: "side")
            return series.count == 2
        }
        #expect(series == ["local": 3, "upstream": 2], "Prometheus log: \(prometheus.stderr.suffix(2000))")
        #expect(Self.query(prometheusPort, #"up{job="gqlmux"}"#, label: "job") == ["gqlmux": 1])
        #expect(Self.query(prometheusPort, "gqlmux_deliveries_total", label: "job") == ["gqlmux": 15])
        prometheus.signal(SIGTERM)
        _ = await prometheus.wait()
        withExtendedLifetime(reservation) {}  // held until Prometheus is gone

        #expect(await daemon.stop() == 0)
        await server.shutdown()
    }

    /// The value of the sample line that starts with `series` (name and labels exactly).
    private func sample(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1).split(separator: " ").first ?? "")
        }
        return nil
    }

    /// Prometheus's instant query API: `label`'s value → the sample value, for each series.
    private static func query(_ port: Int, _ promQL: String, label: String) -> [String: Double] {
        let encoded = promQL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? promQL
        guard let response = httpGet(port: port, "/api/v1/query?query=\(encoded)"), response.status == 200,
            let object = try? JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any],
            let data = object["data"] as? [String: Any], let results = data["result"] as? [[String: Any]]
        else { return [:] }
        var values: [String: Double] = [:]
        for result in results {
            guard let metric = result["metric"] as? [String: String], let key = metric[label],
                let value = result["value"] as? [Any], value.count == 2, let text = value[1] as? String, let number = Double(text)
            else { continue }
            values[key] = number
        }
        return values
    }
}
