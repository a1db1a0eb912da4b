import Foundation
import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPStreaming
import LocalProtocol
import NIOCore
import RequestValidation
import Testing
import Upstream

@testable import GQLMuxConfiguration

@Suite struct ConfigurationTests {
    @Test func readsEveryKey() throws {
        let c = try DaemonConfiguration.parse(
            """
            [upstream]
            url = "wss://api.example.com/graphql"
            connecting_payload = { token = "t", nested = { a = [1, 2] } }
            client_name = "host-a"
            client_version = "2"
            operation_ids = "uuid"
            lazy = true
            lazy_close_timeout = 5
            reconnect_interval = 0.5
            reconnect_max_interval = 60
            reconnect_multiplier = 1.5
            reconnect_jitter = 0.1
            reconnect_max_attempts = 7
            connect_timeout = 3
            connection_ack_timeout = 4
            ping_interval = 0
            pong_timeout = 2.5
            operation_timeout = 7.5
            max_message_bytes = 1048576
            reconnect_if_connected = false
            [upstream.headers]
            Authorization = "Bearer x"
            [upstream.tls]
            ca_file = "/etc/ssl/private-ca.pem"
            [socket]
            path = "/tmp/x.sock"
            mode = "0600"
            [limits]
            max_clients = 5
            max_operations_per_client = 6
            max_line_bytes = 2048
            client_buffer_bytes = 4096
            [security]
            allowed_uids = [1000]
            allowed_gids = [100]
            admin_uids = [1001]
            admin_gids = [10]
            [log]
            level = "debug"
            target = "journal"
            """
        )
        #expect(c.upstream.url.description == "wss://api.example.com/graphql")
        #expect(c.upstream.headers.map(\.name) == ["Authorization"])
        #expect(c.upstream.connectingPayload == .inline(.init(string: #"{"nested":{"a":[1,2]},"token":"t"}"#)))
        #expect(c.upstream.transport.operationIDs == .uuid)
        #expect(c.upstream.transport.lazy && c.upstream.transport.lazyCloseTimeout == .seconds(5))
        #expect(c.upstream.transport.backoff.initial == .milliseconds(500))
        #expect(c.upstream.transport.backoff.maxAttempts == 7)
        #expect(c.upstream.transport.pingInterval == .zero && c.upstream.transport.pongTimeout == .milliseconds(2500))
        #expect(c.upstream.transport.operationTimeout == .milliseconds(7500))
        #expect(c.upstream.tls.caFile == "/etc/ssl/private-ca.pem")
        #expect(!c.upstream.reconnectIfConnected)
        #expect(c.socketPath == "/tmp/x.sock" && c.socketMode == 0o600)
        #expect(c.limits.maxClients == 5 && c.limits.clientBufferBytes == 4096)
        #expect(c.security.allowedUIDs == [1000] && c.security.adminGIDs == [10])
        #expect(c.logLevel == "debug" && c.logTarget == .journal)
    }

    @Test func tlsKeysAsDESIGNWritesThemDottedUnderUpstream() throws {
        let c = try DaemonConfiguration.parse(
            "[upstream]\nurl = \"wss://127.0.0.1:4443/graphql\"\ntls.ca_file = \"/etc/gqlmux/ca.pem\"\ntls.insecure_skip_verify = true\n"
        )
        #expect(c.upstream.tls.caFile == "/etc/gqlmux/ca.pem" && c.upstream.tls.insecureSkipVerify)
    }

    @Test func defaultsMatchTheDesign() throws {
        let c = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://127.0.0.1:4000/graphql\"\n")
        #expect(c.socketPath == "/run/gqlmux/gqlmux.sock" && c.socketMode == 0o660)
        #expect(c.upstream.transport.backoff == .init(initial: .seconds(1), maximum: .seconds(30), multiplier: 2, jitter: 0.2, maxAttempts: 0))
        #expect(c.upstream.transport.connectTimeout == .seconds(10) && c.upstream.transport.ackTimeout == .seconds(10))
        #expect(c.upstream.transport.pingInterval == .seconds(20) && c.upstream.transport.pongTimeout == .seconds(10))
        #expect(c.upstream.maxMessageBytes == 16 << 20)
        #expect(c.limits.maxLineBytes == 1 << 20 && c.limits.clientBufferBytes == 8 << 20)
        #expect(!c.upstream.transport.lazy && c.upstream.transport.operationIDs == .sequential)
    }

    @Test(arguments: [
        ("[upstream]\nurl = \"ws://h/\"\ncolour = 1\n", "[upstream] colour: unknown key"),
        ("[upstream]\nurl = 5\n", "[upstream] url: expected a string"),
        ("[upstream]\nurl = \"http://h/\"\n", "[upstream] url: 'http://h/' must start with ws:// or wss://"),
        ("[upstream]\nurl = \"ws://h:99999/\"\n", "[upstream] url: 'ws://h:99999/' has an invalid port"),
        ("[upstream]\nurl = \"ws://h/\"\nlazy = \"yes\"\n", "[upstream] lazy: expected true or false"),
        ("[upstream]\nurl = \"ws://h/\"\nping_interval = -1\n", "[upstream] ping_interval: -1.0 is out of range (0 to 3600)"),
        ("[upstream]\nurl = \"ws://h/\"\noperation_ids = \"random\"\n", "[upstream] operation_ids"),
        ("[upstream]\nurl = \"ws://h/\"\noperation_timeout = 0\n", "[upstream] operation_timeout: 0.0 is out of range (0.001 to 3600)"),
        ("[upstream]\nurl = \"ws://h/\"\noperation_timeout = 3601\n", "[upstream] operation_timeout: 3601.0 is out of range (0.001 to 3600)"),
        ("[upstream]\nurl = \"ws://h/\"\n[limits]\nmax_clients = 0\n", "[limits] max_clients: 0 is out of range (1 to 65536)"),
        ("[upstream]\nurl = \"ws://h/\"\n[socket]\nmode = \"rw\"\n", "[socket] mode"),
        ("[upstream]\nurl = \"ws://h/\"\n[security]\nallowed_uids = [\"root\"]\n", "[security] allowed_uids"),
        ("[upstream]\nurl = \"ws://h/\"\n[upstream.tls]\nverify = false\n", "[upstream.tls] verify: unknown key"),
        ("[server]\nx = 1\n", "[server]: unknown key"),
        ("", "[upstream] url: required"),
        ("[upstream\nurl=", "TOML syntax error"),
        ("[upstream]\nurl = \"ws://h/\"\nconnecting_payload = {a=1}\nconnecting_payload_file = \"/x\"\n", "set only one"),
        (
            "[upstream]\nurl = \"ws://h/\"\n[upstream.header_files]\nAuthorization = \"token\"\n",
            "[upstream.header_files] Authorization: token is not an absolute path"
        ),
        ("[upstream]\nurl = \"ws://h/\"\n[upstream.header_files]\n\"Bad Name\" = \"/x\"\n", "[upstream.header_files] Bad Name: not a valid HTTP header name"),
        (
            "[upstream]\nurl = \"ws://h/\"\n[upstream.headers]\nauthorization = \"x\"\n[upstream.header_files]\nAuthorization = \"/x\"\n",
            "[upstream.header_files] Authorization: also set in [upstream.headers]"
        ),
        (
            "[upstream]\nurl = \"ws://h/\"\nidentity = \"client\"\n[upstream.header_files]\nAuthorization = \"/x\"\n",
            "[upstream.header_files] Authorization: not with identity = \"client\""
        ),
    ])
    func invalidConfigurationNamesTheKeyAndWhy(text: String, expected: String) {
        do {
            _ = try DaemonConfiguration.parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }

    @Test func proxyKeyAndEnvironment() throws {
        let base = "[upstream]\nurl = \"wss://api.example/g\"\n"
        let environment = ["https_proxy": "http://env:3128", "no_proxy": "localhost"]
        let fromKey = try DaemonConfiguration.parse(base + "proxy = \"http://u:p%40w@corp:8080\"\n", environment: environment)
        #expect(fromKey.upstream.proxy == .always(try HTTPProxy(parsing: "http://u:p%40w@corp:8080")))
        let fromEnvironment = try DaemonConfiguration.parse(base, environment: environment)
        #expect(fromEnvironment.upstream.proxy.proxy(host: "api.example", port: 443, secure: true)?.host == "env")
        #expect(try DaemonConfiguration.parse(base + "proxy = \"\"\n", environment: environment).upstream.proxy == .direct)
        #expect(try DaemonConfiguration.parse(base, environment: [:]).upstream.proxy == .direct)
        for (bad, environment, expected) in [
            ("proxy = \"socks5://u:secret@p:1\"\n", [:], "[upstream] proxy: 'socks5://***@p:1' is not an http:// proxy"),
            ("", ["https_proxy": "https://p:1"], "[upstream] proxy: https_proxy: 'https://p:1' is not an http:// proxy"),
        ] {
            #expect {
                try DaemonConfiguration.parse(base + bad, environment: environment)
            } throws: { error in
                (error as? ConfigurationError)?.description.hasPrefix(expected) == true
            }
        }
    }

    @Test func protocolHTTPURLAndPoolKeys() throws {
        let base = "[upstream]\nurl = \"ws://h/g\"\n"
        let defaults = try DaemonConfiguration.parse(base)
        #expect(defaults.upstream.protocols == [.transportWS, .legacyWS])
        #expect(defaults.upstream.httpURL == nil)
        #expect(defaults.connections.maxOperationsPerConnection == 0 && defaults.connections.maxConnections == 4)
        let c = try DaemonConfiguration.parse(
            base + "protocol = \"graphql-ws\"\nhttp_url = \"https://h:8443/graphql?x=1\"\nhttp_timeout = 5\n"
                + "max_operations_per_connection = 100\nmax_connections = 3\n"
        )
        #expect(c.upstream.protocols == [.legacyWS])
        #expect(c.upstream.httpURL?.description == "https://h:8443/graphql?x=1")
        #expect(c.upstream.httpTimeout == .seconds(5))
        #expect(c.connections.maxOperationsPerConnection == 100 && c.connections.maxConnections == 3)
        #expect(try DaemonConfiguration.parse(base + "protocol = \"graphql-transport-ws\"").upstream.protocols == [.transportWS])
        for (bad, expected) in [
            ("protocol = \"sse\"", "[upstream] protocol: 'sse' is not one of auto, graphql-transport-ws, graphql-ws"),
            ("http_url = \"ws://h/g\"", "[upstream] http_url: 'ws://h/g' must start with http:// or https://"),
            ("max_connections = 0", "[upstream] max_connections: 0 is out of range (1 to 64)"),
            ("max_operations_per_connection = -1", "[upstream] max_operations_per_connection: -1 is out of range"),
        ] {
            #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(base + bad) }
            do {
                _ = try DaemonConfiguration.parse(base + bad)
            } catch {
                #expect(error.description.hasPrefix(expected), "\(error.description)")
            }
        }
    }

    @Test func shippedExampleConfigParses() throws {
        let path = repositoryRoot() + "/config/gqlmuxd.toml"
        let c = try DaemonConfiguration.load(path: path)
        #expect(c.socketPath == "/run/gqlmux/gqlmux.sock")
    }
}

@Suite struct SubscribeRequestTests {
    func parse(_ payload: String) throws -> SubscribeRequest {
        do {
            return try SubscribeRequest.parse(.init(string: payload))
        } catch {
            throw ParseFailure(code: error.code.rawValue)
        }
    }
    struct ParseFailure: Error, Equatable { var code: String }

    @Test func findsTheOperationTypeWithARealParser() throws {
        #expect(try parse(##"{"query":"# subscription in a comment\n{ hello }"}"##).kind == .query)
        #expect(try parse(#"{"query":"query { echo(text: \"subscription { x }\") }"}"#).kind == .query)
        #expect(try parse(#"{"query":"fragment F on S { tick } subscription { ...F }"}"#).kind == .subscription)
        #expect(try parse(#"{"query":"mutation M { a } subscription S { b }","operationName":"S"}"#).kind == .subscription)
        #expect(try parse(#"{"query":"mutation M { a } subscription S { b }","operationName":"M"}"#).kind == .mutation)
    }

    @Test func dedupKeyIgnoresFormattingButNotMeaning() throws {
        let a = try parse(#"{"query":"subscription($a: Int) { tick(a: $a) }","variables":{"a":1,"b":[true]}}"#)
        let b = try parse(##"{"query":"# c\nsubscription ($a:Int){tick(a:$a)}","variables":{ "b": [ true ], "a": 1 }}"##)
        let c = try parse(#"{"query":"subscription($a: Int) { tick(a: $a) }","variables":{"a":2,"b":[true]}}"#)
        let d = try parse(#"{"query":"subscription($a: Int) { tick(a: $a) }","variables":{"a":1,"b":[true]},"extensions":{"x":1}}"#)
        #expect(a.dedupKey == b.dedupKey)
        #expect(a.dedupKey != c.dedupKey)
        #expect(a.dedupKey != d.dedupKey)
    }

    @Test func whatIsForwardedIsWhatIsKeyed() throws {
        // Members other than the request's four would go upstream unkeyed: they are left out.
        let plain = try parse(#"{"query":"subscription { tick }","variables":{"a":1}}"#)
        let extra = try parse(#"{"query":"subscription { tick }","id":"x","variables":{"a":1},"tenant":{"t":"alice"}}"#)
        #expect(extra.dedupKey == plain.dedupKey)
        #expect(String(buffer: extra.payload) == #"{"query":"subscription { tick }","variables":{"a":1}}"#)
        #expect(String(buffer: plain.payload) == #"{"query":"subscription { tick }","variables":{"a":1}}"#, "untouched")
        // extensions.gqlmux goes, and a foreign member with it.
        let own = try parse(#"{"extra":1,"query":"subscription { tick }","extensions":{"gqlmux":{"replayLast":true},"k":1}}"#)
        #expect(String(buffer: own.payload) == #"{"query":"subscription { tick }","extensions":{"k":1}}"#)
        // Twice the same member: what is keyed and what a server reads could differ. Refused.
        for twice in [
            #"{"query":"subscription { tick }","extensions":{"gqlmux":{},"x":"evil"},"extensions":null}"#,
            #"{"query":"subscription { a }","query":"subscription { b }"}"#,
        ] {
            #expect(throws: ParseFailure(code: "BAD_REQUEST")) { try parse(twice) }
        }
    }

    @Test func canonicalJSONSortsKeysAtEveryLevelAndNormalisesStrings() {
        #expect(SubscribeRequest.canonicalJSON(#" { "b" : [ {"z":1, "a":"\u0041\/"} , 2.50 ] , "a" : null } "#) == #"{"a":null,"b":[{"a":"A/","z":1},2.50]}"#)
        #expect(SubscribeRequest.canonicalJSON(#"{"k":1,"k":2}"#) == #"{"k":1,"k":2}"#)  // duplicates keep their order
        #expect(SubscribeRequest.canonicalJSON(#"{"k":1,"k":2}"#) != SubscribeRequest.canonicalJSON(#"{"k":2,"k":1}"#))
        #expect(SubscribeRequest.canonicalJSON("not json {") == "not json {")
        #expect(SubscribeRequest.canonicalJSON("null") == "null")
    }

    @Test func documentBoundsCountTokensAndNestingOutsideStringsAndComments() throws {
        var text: [UInt8]? = []
        let document = "query Q($v: [Int!]) { a(s: \"{{[[\", b: \"\"\"{ \\\"\"\" ((\"\"\") { b } } # {{{{\n"
        let bounds = try DocumentBounds.check(document, maxTokens: 100, maxDepth: 10, tokenText: &text)
        #expect(bounds.depth == 2)  // { a( ... ) { b } }: the brackets in strings and comments do not count
        #expect(bounds.tokens == 25)  // commas and the comment are not tokens
        #expect(String(decoding: text!, as: UTF8.self) == "query Q ( $ v : [ Int ! ] ) { a ( s : \"{{[[\" b : \"\"\"{ \\\"\"\" ((\"\"\" ) { b } } ")
        var none: [UInt8]? = nil
        #expect(throws: DocumentBounds.Exceeded.depth(limit: 2)) {
            try DocumentBounds.check("{ a { b { c } } }", maxTokens: 100, maxDepth: 2, tokenText: &none)
        }
        #expect(throws: DocumentBounds.Exceeded.tokens(limit: 3)) {
            try DocumentBounds.check("{ a b c }", maxTokens: 3, maxDepth: 10, tokenText: &none)
        }
        #expect(throws: SubscribeRequest.Invalid.self) {
            try SubscribeRequest.parse(.init(string: #"{"query":"{ a { b } }"}"#), limits: .init(maxTokens: 100, maxDepth: 1))
        }
    }
}

/// `[upstream] transport` and the HTTP streaming keys.
@Suite struct StreamingConfigurationTests {
    @Test func multipartAndSSENeedOnlyHTTPURL() throws {
        let defaults = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/g\"\n")
        #expect(defaults.upstream.carrier == .websocket && defaults.upstream.httpStreams == nil)
        #expect(defaults.upstream.heartbeatTimeout == .seconds(15) && defaults.upstream.maxStreams == 256)
        #expect(defaults.upstream.multipartAccept == "multipart/mixed;subscriptionSpec=1.0, application/json")

        let multipart = try DaemonConfiguration.parse(
            "[upstream]\ntransport = \"multipart\"\nhttp_url = \"https://h:8443/graphql\"\nheartbeat_timeout = 2.5\nmax_streams = 10\n"
                + "multipart_accept = \"multipart/mixed;subscriptionSpec=\\\"1.0\\\"\"\nreconnect_interval = 0.5\n"
                + "[upstream.headers]\nAuthorization = \"Bearer t\"\n"
        )
        let streams = try #require(multipart.upstream.httpStreams)
        #expect(streams.flavor == .multipart(accept: "multipart/mixed;subscriptionSpec=\"1.0\""))
        #expect(streams.url.description == "https://h:8443/graphql")
        #expect(streams.options.heartbeatTimeout == .milliseconds(2_500) && streams.maxStreams == 10)
        #expect(streams.options.backoff.initial == .milliseconds(500))
        #expect(streams.headers.contains { $0.name == "Authorization" && $0.value == "Bearer t" })

        let sse = try DaemonConfiguration.parse("[upstream]\ntransport = \"sse\"\nhttp_url = \"http://h/g\"\n")
        #expect(sse.upstream.httpStreams?.flavor == .sse)
    }

    @Test(arguments: [
        ("transport = \"grpc\"\nurl = \"ws://h/\"", "[upstream] transport: 'grpc' is not one of websocket, multipart, sse"),
        ("transport = \"sse\"", "[upstream] http_url: required with transport = \"sse\""),
        ("transport = \"multipart\"\nurl = \"ws://h/\"", "[upstream] http_url: required with transport = \"multipart\""),
        ("transport = \"sse\"\nhttp_url = \"http://h/\"\nheartbeat_timeout = 0", "[upstream] heartbeat_timeout: 0.0 is out of range (0.001 to 3600)"),
        ("transport = \"sse\"\nhttp_url = \"http://h/\"\nmax_streams = 0", "[upstream] max_streams: 0 is out of range (1 to 100000)"),
        ("transport = \"sse\"\nhttp_url = \"http://h/\"\nmax_streams = 100001", "[upstream] max_streams: 100001 is out of range (1 to 100000)"),
        ("transport = \"websocket\"", "[upstream] url: required"),
    ])
    func invalidStreamingKeysNameTheKey(lines: String, expected: String) {
        do {
            _ = try DaemonConfiguration.parse("[upstream]\n" + lines + "\n")
            Issue.record("accepted: \(lines)")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }
}

/// `[graphql_endpoint]`: defaults, and a listen address off the loopback refused.
@Suite struct GraphQLEndpointConfigurationTests {
    @Test func defaultsBesideTheLineSocketAndLoopbackOnly() throws {
        let defaults = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/\"\n[socket]\npath = \"/run/x/gqlmux.sock\"\n")
        #expect(defaults.graphqlEndpoint.socketPath(beside: defaults.socketPath) == "/run/x/graphql.sock")
        #expect(defaults.graphqlEndpoint.listen == nil && defaults.graphqlEndpoint.path == "/graphql")
        let off = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/\"\n[graphql_endpoint]\nsocket = \"\"\n")
        #expect(off.graphqlEndpoint.socketPath(beside: off.socketPath) == nil)
        for host in ["127.0.0.1:4000", "127.1.2.3:0", "[::1]:4000", "localhost:4000"] {
            let c = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/\"\n[graphql_endpoint]\nlisten = \"\(host)\"\n")
            #expect(c.graphqlEndpoint.listen != nil, "\(host)")
        }
    }

    @Test(arguments: ["0.0.0.0:4000", "192.168.1.5:4000", "[::]:4000", "example.com:4000", "128.0.0.1:4000"])
    func aNonLoopbackListenIsRefused(listen: String) {
        do {
            _ = try DaemonConfiguration.parse("[upstream]\nurl = \"ws://h/\"\n[graphql_endpoint]\nlisten = \"\(listen)\"\n")
            Issue.record("accepted \(listen)")
        } catch {
            #expect(error.description.contains("is not a loopback address"), "\(error.description)")
        }
    }
}
