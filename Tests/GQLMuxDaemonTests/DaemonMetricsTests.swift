import Foundation
import GQLMuxDaemon
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import TestUpstream
import Testing

/// The metrics' meaning, on an in-process daemon: reconnects by cause and close code, the
/// reconnect duration, errors by code, and the dedup ratio's two gauges.
@Suite struct DaemonMetricsTests {
    /// The labels come from the typed cause, never from its text.
    @Test func reconnectCauseLabelsComeFromTheTypedCause() {
        let cases: [(DisconnectCause, String, UInt16?, String)] = [
            (.closed(code: 1012, reason: "service restart"), "closed", 1012, "upstream closed 1012 service restart"),
            (.closed(code: 1006, reason: ""), "closed", 1006, "upstream closed 1006"),
            (.deadPeer(silence: .seconds(5), afterKeepAlive: false), "dead_peer", nil, "peer silent for 5.0s after ping"),
            (.connectTimeout(.seconds(10)), "connect_timeout", nil, "connect timeout after 10.0s"),
            (.ackTimeout(.seconds(10)), "ack_timeout", nil, "no connection_ack within 10.0s"),
            (.protocolViolation("invalid JSON"), "protocol_violation", nil, "protocol violation: invalid JSON"),
            (
                .network("upstream closed 1012 (a refusal's text that only looks like a close)"), "network", nil,
                "upstream closed 1012 (a refusal's text that only looks like a close)"
            ),
        ]
        for (cause, label, code, text) in cases {
            #expect(cause.metricLabel == label && cause.closeCode?.code == code && cause.description == text, "\(cause)")
        }
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
            await until("duplicate refused", on: b) { !b.lines(containing: "DUPLICATE_ID").isEmpty }

            await rig.server.closeAll(code: 1012, reason: "service restart")
            await until("reconnected", on: rig.log) { rig.log.count(.reconnected) == 1 }
            await rig.upstreamActive(1)

            let text = try await rig.daemon.eventLoop.submit { String(decoding: rig.daemon.metricsText(), as: UTF8.self) }.get()
            #expect(text.contains(#"gqlmux_subscriptions{side="local"} 2.0"#))
            #expect(text.contains(#"gqlmux_subscriptions{side="upstream"} 1.0"#))
            #expect(text.contains(#"gqlmux_reconnects_total{cause="closed",close_code="1012"} 1"#))
            #expect(text.contains("gqlmux_reconnect_duration_seconds_count 1"))
            #expect(text.contains(#"gqlmux_errors_total{code="DUPLICATE_ID"} 1"#))
            #expect(text.contains(#"gqlmux_upstream_connections{state="connected",upstream="default"} 1.0"#))
        }
    }
}
