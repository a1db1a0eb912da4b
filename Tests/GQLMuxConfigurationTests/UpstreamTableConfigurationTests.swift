import GQLMuxVocabulary
import HTTPFields
import LocalProtocol
import NIOCore
import RequestValidation
import Testing
import Upstream

@testable import GQLMuxConfiguration

/// `[upstreams.NAME]`, `identity`, `forward_headers`, `[upstreams.NAME.peers]`,
/// `max_identities`: what is read, and each mistake named.
@Suite struct UpstreamTableConfigurationTests {
    private let base = "[upstream]\nurl = \"ws://127.0.0.1:1/graphql\"\n"

    @Test func theTableIsDefaultThenEachNameInOrder() throws {
        let c = try DaemonConfiguration.parse(
            base + """
                [upstreams.zeta]
                url = "wss://z.example/graphql"
                max_connections = 2
                max_operations_per_connection = 5
                [upstreams.alpha-1]
                transport = "sse"
                http_url = "https://a.example/graphql"
                identity = "client"
                forward_headers = ["Authorization", "X-Tenant"]
                [upstreams.peers_x]
                url = "ws://p.example/graphql"
                identity = "peer"
                [upstreams.peers_x.peers]
                "uid:1001" = "/etc/gqlmux/alice.json"
                "gid:2000" = "/etc/gqlmux/staff.json"
                [limits]
                max_identities = 7
                """
        )
        #expect(c.upstreams.map(\.name) == ["default", "alpha-1", "peers_x", "zeta"])
        #expect(c.upstreams[0].identity == .host)
        #expect(c.upstream(named: "zeta")?.layout == UpstreamLayout(maxConnections: 2, maxOperationsPerConnection: 5))
        #expect(c.upstream(named: "zeta")?.upstream.url.description == "wss://z.example/graphql")
        #expect(c.upstream(named: "alpha-1")?.identity == .client(forwardHeaders: ["authorization", "x-tenant"]))
        #expect(c.upstream(named: "alpha-1")?.layout.subscriptions == .streams(max: 256))
        let peers = PeerPayloads(byUID: [1001: "/etc/gqlmux/alice.json"], byGID: [2000: "/etc/gqlmux/staff.json"])
        #expect(c.upstream(named: "peers_x")?.identity == .peer(peers))
        #expect(peers.payloadFile(uid: 1001, gid: 2000) == "/etc/gqlmux/alice.json", "the uid's entry first")
        #expect(peers.payloadFile(uid: 5, gid: 2000) == "/etc/gqlmux/staff.json")
        #expect(peers.payloadFile(uid: 5, gid: 5) == nil)
        #expect(c.limits.maxIdentities == 7)
        #expect(c.limits.maxCredentialBytes == 16_384 && c.limits.maxIdentitiesPerUID == 16, "the defaults")
        #expect(c.upstream(named: "nope") == nil)
        // client identity: default forward_headers
        let d = try DaemonConfiguration.parse(base + "identity = \"client\"\n")
        #expect(d.upstreams[0].identity == .client(forwardHeaders: ["authorization"]))
    }

    @Test func eachMistakeIsNamed() {
        let cases: [(String, String)] = [
            ("[upstreams.Bad]\nurl = \"ws://x/graphql\"\n", "[upstreams.Bad]: an upstream's name is 1 to 32 of a-z, 0-9, _ and -"),
            ("[upstreams.\(String(repeating: "a", count: 33))]\nurl = \"ws://x/graphql\"\n", "an upstream's name is 1 to 32"),
            ("[upstreams.default]\nurl = \"ws://x/graphql\"\n", "[upstreams.default]: the upstream named default is [upstream]"),
            ("[upstreams.b]\n", "[upstreams.b] url: required"),
            ("[upstreams.b]\nurl = \"http://x/graphql\"\n", "[upstreams.b] url:"),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nbogus = 1\n", "[upstreams.b] bogus: unknown key"),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"me\"\n", "[upstreams.b] identity: 'me' is not one of host, client, peer"),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"peer\"\n", "[upstreams.b.peers]: required with identity = \"peer\""),
            (
                "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"peer\"\n[upstreams.b.peers]\n\"user:1\" = \"/f\"\n",
                "[upstreams.b.peers] user:1: expected \"uid:NUMBER\""
            ),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nforward_headers = [\"x\"]\n", "[upstreams.b] forward_headers: only with identity = \"client\""),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\nforward_headers = [\"Host\"]\n", "belongs to the connection"),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\nforward_headers = [\"a b\"]\n", "is not an HTTP header name"),
            (
                "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\nconnecting_payload = { token = \"host\" }\n",
                "[upstreams.b] connecting_payload: not with identity = \"client\""
            ),
            (
                "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\n[upstreams.b.headers]\nAuthorization = \"Bearer host\"\n",
                "[upstreams.b.headers] Authorization: not with identity = \"client\""
            ),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\n[upstreams.b.peers]\n\"uid:1\" = \"/f\"\n", "[upstreams.b.peers]: only with identity = \"peer\""),
            ("[limits]\nmax_identities = 0\n", "[limits] max_identities: 0 is out of range"),
            ("[limits]\nmax_credential_bytes = 32\n", "[limits] max_credential_bytes: 32 is out of range"),
            (
                "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"peer\"\n[upstreams.b.peers]\n\"uid:1\" = \"/a\"\n\"uid:01\" = \"/b\"\n",
                "uid:01: expected"
            ),
            ("[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"peer\"\n[upstreams.b.peers]\n\"gid:+7\" = \"/a\"\n", "gid:+7: expected"),
            ("[limits]\nmax_identities_per_uid = 0\n", "[limits] max_identities_per_uid: 0 is out of range"),
            // 2,304 clients (1,024 + 1,024 + 256 with `listen`) × 64 KiB is over what a restart's record may hold.
            (
                "[upstreams.c]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\n[limits]\nmax_credential_bytes = 65536\n[graphql_endpoint]\nlisten = \"127.0.0.1:0\"\nallow_all_local_users = true\n",
                "× (the clients the listeners may hold (2304"
            ),
            (
                "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\n[graphql_endpoint]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"/nonexistent\"\n",
                "token_file",
            ),
        ]
        for (text, expected) in cases {
            do {
                _ = try DaemonConfiguration.parse(base + text)
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(text) → \(error.description)")
            }
        }
    }

    @Test func theRestartRecordBoundAppliesOnlyWhereCredentialsAreKept() throws {
        // No upstream with identity = "client": no credential is kept, so no bound to check.
        let c = try DaemonConfiguration.parse(
            base + "[limits]\nmax_clients = 65536\nmax_credential_bytes = 65536\n[graphql_endpoint]\nlisten = \"127.0.0.1:0\"\nallow_all_local_users = true\n"
        )
        #expect(c.limits.maxClients == 65536)
    }

    @Test func theEndpointTokenAndAForwardedAuthorizationAreRefusedTogether() throws {
        var c = try DaemonConfiguration.parse(base + "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\n")
        c.graphqlEndpoint.tokenFile = "/etc/gqlmux/endpoint.token"
        #expect(throws: ConfigurationError.self) { try c.checkForwardedHeaders() }
        do {
            try c.checkForwardedHeaders()
        } catch {
            #expect(error.description.contains("[graphql_endpoint] token_file and [upstreams.b] forward_headers"))
        }
        c.upstreams[1].identity = .client(forwardHeaders: ["x-upstream-authorization"])
        #expect(throws: Never.self) { try c.checkForwardedHeaders() }
    }

    @Test func aReloadMayAddAndRemoveButNotChangeAnUpstreamsTransportOrIdentity() throws {
        let running = try DaemonConfiguration.parse(base + "[upstreams.b]\nurl = \"ws://x/graphql\"\n")
        let added = try DaemonConfiguration.parse(base + "[upstreams.c]\nurl = \"ws://y/graphql\"\n").reloading(running)
        #expect(added.upstreams.map(\.name) == ["default", "c"])
        #expect(throws: ConfigurationError.self) {
            try DaemonConfiguration.parse(base + "[upstreams.b]\ntransport = \"sse\"\nhttp_url = \"http://x/graphql\"\n").reloading(running)
        }
        #expect(throws: ConfigurationError.self) {
            try DaemonConfiguration.parse(base + "[upstreams.b]\nurl = \"ws://x/graphql\"\nidentity = \"client\"\n").reloading(running)
        }
    }

    @Test func aLineClientsPresentedCredentialIsReadOrRefusedWithItsReason() throws {
        let limits = SubscribeRequest.Limits()
        let good = ClientRequest(
            line: ByteBuffer(
                string: #"{"type":"connection_init","payload":{"client":"a","upstream":{"payload":{"token":"t"},"headers":{"Authorization":"Bearer t"}}}}"#
            ),
            limits: limits
        )
        guard case .connectionInit("a", let presented?) = good else {
            Issue.record("\(good)")
            return
        }
        #expect(presented.payload == Array(#"{"token":"t"}"#.utf8))
        #expect(presented.headers == [PresentedCredential.Header(name: "Authorization", value: "Bearer t")])
        for bad in [
            #"{"upstream":"x"}"#, #"{"upstream":{"payload":[1]}}"#, #"{"upstream":{"headers":{"a":1}}}"#,
            #"{"upstream":{"headers":{"a":"x\r\nInjected: 1"}}}"#, #"{"upstream":{"headers":{"a b":"x"}}}"#, #"{"upstream":{"other":{}}}"#,
        ] {
            let request = ClientRequest(line: ByteBuffer(string: #"{"type":"connection_init","payload":"# + bad + "}"), limits: limits)
            guard case .invalid(let reason) = request else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(reason.hasPrefix("connection_init: payload.upstream"), "\(reason)")
        }
        // A subscribe's upstream: a string names it; anything else is that operation's error.
        let named = ClientRequest(line: ByteBuffer(string: #"{"type":"subscribe","id":"1","upstream":"b","payload":{"query":"{ a }"}}"#), limits: limits)
        guard case .subscribe("1", .success(let request)) = named else {
            Issue.record("\(named)")
            return
        }
        #expect(request.upstream == "b")
        let mistyped = ClientRequest(line: ByteBuffer(string: #"{"type":"subscribe","id":"1","upstream":7,"payload":{"query":"{ a }"}}"#), limits: limits)
        guard case .subscribe("1", .failure(let invalid)) = mistyped else {
            Issue.record("\(mistyped)")
            return
        }
        #expect(invalid.code == .badRequest)
    }

    @Test func aCredentialReplacesTheConfiguredPayloadAndHeadersOfItsNames() throws {
        var configuration = UpstreamConfiguration(url: try UpstreamURL("ws://x/graphql"))
        configuration.headers = [("Authorization", "Bearer host"), ("X-Version", "2")]
        let credential = LaneCredential(payload: .inline(Array(#"{"token":"t"}"#.utf8)), headers: [.init(name: "authorization", value: "Bearer t")])
        let applied = credential.applied(to: configuration)
        #expect(applied.connectingPayload == .inline(ByteBuffer(string: #"{"token":"t"}"#)))
        #expect(applied.headers.map { "\($0.name): \($0.value)" } == ["X-Version: 2", "authorization: Bearer t"])
        #expect(
            LaneCredential(headers: [.init(name: "B", value: "1"), .init(name: "a", value: "2")])
                == LaneCredential(headers: [.init(name: "a", value: "2"), .init(name: "b", value: "1")])
        )
    }
}
