import LocalEndpoint
import Testing

@testable import GQLMuxDaemon

/// What the doors every local user can reach show and take: the metrics listener's checks, and
/// upstream URLs as `status` and `STATUS=` show them to anyone but an admin.
@Suite struct DoorTests {
    @Test func theMetricsListenerServesToolsButNotWebPagesOrRebindingNames() {
        let access = MetricsAccess(listenHost: "0.0.0.0")
        for host in ["127.0.0.1:9464", "localhost:9464", "[::1]:9464", "10.1.2.3:9464", "0.0.0.0:9464"] {
            #expect(access.refusal(host: [host], origin: [], secFetchSite: []) == nil, "\(host)")
        }
        #expect(access.refusal(host: ["attacker.example:9464"], origin: [], secFetchSite: [])?.status == 403, "a rebinding name")
        #expect(access.refusal(host: [], origin: [], secFetchSite: [])?.status == 400)
        #expect(access.refusal(host: ["a", "b"], origin: [], secFetchSite: [])?.status == 400)
        #expect(access.refusal(host: ["127.0.0.1:9464"], origin: ["http://127.0.0.2:8000"], secFetchSite: [])?.status == 403)
        #expect(access.refusal(host: ["127.0.0.1:9464"], origin: [], secFetchSite: ["cross-site"])?.status == 403)
        let named = MetricsAccess(listenHost: "metrics.internal")
        #expect(named.refusal(host: ["metrics.internal:9464"], origin: [], secFetchSite: []) == nil, "the listen host's own name")
        #expect(named.refusal(host: ["other.internal"], origin: [], secFetchSite: [])?.status == 403)
    }

    @Test func urlsAreShownWithoutQueryStringsOrUserInfo() {
        #expect(StatusReport.shown("wss://api.example.com/graphql?apikey=K") == "wss://api.example.com/graphql")
        #expect(StatusReport.shown("wss://user:pass@api.example.com:8443/graphql#x") == "wss://api.example.com:8443/graphql")
        #expect(StatusReport.shown("https://h/p@q?x=@") == "https://h/p@q", "an @ in the path is not user info")
        #expect(StatusReport.shown("ws://127.0.0.1:4000/graphql") == "ws://127.0.0.1:4000/graphql")
    }
}
