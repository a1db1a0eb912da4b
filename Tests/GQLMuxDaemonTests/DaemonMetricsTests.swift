import Foundation
import GQLMuxDaemon
import Testing

/// The metrics' meaning, on an in-process daemon: reconnects by cause and close code, the
/// reconnect duration, errors by code, and the dedup ratio's two gauges.
@Suite struct DaemonMetricsTests {
    @Test func reconnectCausesReadFromTheTransportsWords() {
        #expect(ReconnectCause("upstream closed 1012 service restart") == .init(cause: "closed", closeCode: "1012"))
        #expect(ReconnectCause("upstream closed 1006") == .init(cause: "closed", closeCode: "1006"))
        #expect(ReconnectCause("peer silent for 5.0s after ping") == .init(cause: "dead_peer", closeCode: "none"))
        #expect(ReconnectCause("connect timeout after 10.0s") == .init(cause: "connect_timeout", closeCode: "none"))
        #expect(ReconnectCause("no connection_ack within 10.0s") == .init(cause: "ack_timeout", closeCode: "none"))
        #expect(ReconnectCause("protocol violation: invalid JSON") == .init(cause: "protocol_violation", closeCode: "none"))
        #expect(ReconnectCause("connection refused (errno 111)") == .init(cause: "network", closeCode: "none"))
    }

    @Test func metricsListenAddressesAreCheckedAtParseTime() throws {
        let address = try MetricsListenAddress("127.0.0.1:9464")
        #expect(address.host == "127.0.0.1" && address.port == 9464)
        #expect(try MetricsListenAddress("[::1]:9464").description == "[::1]:9464")
        #expect(throws: ConfigurationError.self) { try MetricsListenAddress("9464") }
        #expect(throws: ConfigurationError.self) { try MetricsListenAddress("127.0.0.1:70000") }
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/g\"\n[metrics]\nlisten = \"x\"\n") }
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/g\"\n[metrics]\nport = 1\n") }
        #expect(try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/g\"\n").metricsListen == nil)
    }

    @Test func reconnectsErrorsAndDedupAreCounted() async throws {
        try await DaemonRig.with() { rig in
            let a = try await rig.connect()
            let b = try await rig.connect()
            a.subscribe(id: "1")
            b.subscribe(id: "1")
            b.subscribe(id: "1")  // DUPLICATE_ID
            await rig.upstreamActive(1)
            await eventually("duplicate refused") { !b.lines(containing: "DUPLICATE_ID").isEmpty }

            await rig.server.closeAll(code: 1012, reason: "service restart")
            await eventually("reconnected") { rig.log.count(.reconnected) == 1 }
            await rig.upstreamActive(1)

            let text = try await rig.daemon.eventLoop.submit { String(decoding: rig.daemon.metricsText(), as: UTF8.self) }.get()
            #expect(text.contains(#"gqlmux_subscriptions{side="local"} 2.0"#))
            #expect(text.contains(#"gqlmux_subscriptions{side="upstream"} 1.0"#))
            #expect(text.contains(#"gqlmux_reconnects_total{cause="closed",close_code="1012"} 1"#))
            #expect(text.contains("gqlmux_reconnect_duration_seconds_count 1"))
            #expect(text.contains(#"gqlmux_errors_total{code="DUPLICATE_ID"} 1"#))
            #expect(text.contains(#"gqlmux_upstream_connections{state="connected"} 1.0"#))
        }
    }
}
