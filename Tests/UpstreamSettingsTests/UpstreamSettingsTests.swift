import Testing

@testable import UpstreamSettings

/// `[upstream] proxy` and the proxy environment as curl reads them.
@Suite struct ProxySettingsTests {
    @Test func proxyURLsAreParsedWithPercentEncodedCredentials() throws {
        let proxy = try HTTPProxy(parsing: "http://gq%20l:p%40ss%3Aw@proxy.corp:3128")
        #expect(proxy.host == "proxy.corp" && proxy.port == 3128)
        #expect(proxy.authorization == "Basic Z3EgbDpwQHNzOnc=")  // base64("gq l:p@ss:w")
        #expect(try HTTPProxy(parsing: "proxy.corp:8080").port == 8080)
        #expect(try HTTPProxy(parsing: "http://[::1]:3128/").host == "::1")
        #expect(try HTTPProxy(parsing: "http://proxy").port == 80)
        #expect(try HTTPProxy(parsing: "http://proxy").authorization == nil)
        for bad in [
            "https://proxy:443", "socks5://proxy:1080", "http://proxy:0", "http://proxy:x", "http://:3128", "http://proxy/path", "http://u:%zz@proxy:1",
        ] {
            #expect(throws: HTTPProxy.ParseError.self, "\(bad)") { try HTTPProxy(parsing: bad) }
        }
        let error = #expect(throws: HTTPProxy.ParseError.self) { try HTTPProxy(parsing: "https://user:secret@proxy:1") }
        #expect(error?.description.contains("secret") == false, "a password never reaches a message")
        for bad in ["http://proxy:3128/?auth=secret", "socks5://u:se/cret@proxy:1", "http://proxy:3128/path#secret"] {
            let error = #expect(throws: HTTPProxy.ParseError.self) { try HTTPProxy(parsing: bad) }
            #expect(error?.description.contains("secret") == false && error?.description.contains("cret") == false, "\(error?.description ?? "")")
        }
    }

    @Test func theEnvironmentIsReadAsCurlReadsIt() throws {
        #expect(try ProxyChoice.fromEnvironment([:]) == .direct)
        let choice = try ProxyChoice.fromEnvironment([
            "HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "http_proxy": "plain:3",
            "no_proxy": "localhost, .internal.example,10.0.0.7,svc:8443",
        ])
        #expect(choice.proxy(host: "api.example", port: 443, secure: true)?.host == "lower")
        #expect(choice.proxy(host: "api.example", port: 80, secure: false)?.host == "plain")
        #expect(choice.proxy(host: "localhost", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "a.internal.example", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "internal.example", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "notinternal.example", port: 443, secure: true) != nil)
        #expect(choice.proxy(host: "10.0.0.7", port: 443, secure: true) == nil)
        #expect(choice.proxy(host: "svc", port: 8443, secure: true) == nil)
        #expect(choice.proxy(host: "svc", port: 443, secure: true) != nil)
        #expect(try ProxyChoice.fromEnvironment(["http_proxy": "http://p:1", "no_proxy": "*"]).proxy(host: "x", port: 80, secure: false) == nil)
        #expect(try ProxyChoice.fromEnvironment(["http_proxy": "http://p:1"]).proxy(host: "x", port: 443, secure: true) == nil)
        #expect(throws: HTTPProxy.ParseError.self) { try ProxyChoice.fromEnvironment(["https_proxy": "socks5://p:1"]) }
        #expect(ProxyChoice.always(try HTTPProxy(parsing: "p:1")).proxy(host: "localhost", port: 1, secure: false) != nil)
    }
}

/// The upstream's URLs: `url` (WebSocket) and `http_url`.
@Suite struct UpstreamURLTests {
    @Test func webSocketURLsGiveTheirHostPortAndTarget() throws {
        let plain = try UpstreamURL("ws://api.example/graphql?x=1#frag")
        #expect(!plain.secure && plain.host == "api.example" && plain.port == 80 && plain.target == "/graphql?x=1")
        let secure = try UpstreamURL("wss://[::1]:8443")
        #expect(secure.secure && secure.host == "::1" && secure.port == 8443 && secure.target == "/")
        #expect(try UpstreamURL("ws://h?q").target == "/?q", "a query with no path gets the root path")
        for bad in ["http://h/", "ws://", "ws://user:pw@h/", "ws://[::1/", "ws://[::1]x/", "ws://h:0/", "ws://h:65536/", "ws://h:x/", "ws://:80/"] {
            #expect(throws: UpstreamURLError.self, "\(bad)") { try UpstreamURL(bad) }
        }
        // A reload's error reaches STATUS=, which every local user reads: no user info (whatever
        // characters its password holds), no query; a URL with an '@' is not quoted at all.
        for (bad, said) in [
            ("ws://user:secret@h/", "the URL has user info"), ("ws://h:99999/g?apikey=secret", "'ws://h:99999/g' has an invalid port"),
            ("ftp://h/?apikey=secret", "'ftp://h/' must start with"), ("https://u:secret@h/", "the URL must start with ws://"),
            ("wss://key:se/cret+e==@api.example/graphql", "the URL has user info"), ("wss://key:se?cret@h", "the URL has an invalid port"),
            ("wss:/u:secret@h", "the URL must start with"), ("u:secret@h:443", "the URL must start with"),
            ("wss://secret/PART@h/graphql", "the URL has user info or an '@' before its query"),
        ] {
            let error = #expect(throws: UpstreamURLError.self) { try UpstreamURL(bad) }
            for part in ["secret", "cret", "key", "PART"] {
                #expect(error?.description.contains(part) == false, "\(bad): \(error?.description ?? "")")
            }
            #expect(error?.description.hasPrefix(said) == true, "\(bad): \(error?.description ?? "")")
        }
        #expect(throws: UpstreamURLError.self, "an '@' in the path must be %40") { try UpstreamURL("ws://h/p@q") }
        #expect(try UpstreamURL("ws://h/p%40q?mail=a@b").target == "/p%40q?mail=a@b", "an '@' in the query is the query's")
        let http = #expect(throws: UpstreamURLError.self) { try HTTPURL("http://u:secret@h:1/?token=secret") }
        #expect(
            http?.description
                == "the URL has user info or an '@' before its query, which is not supported (send credentials in headers; write an '@' in the path as %40)"
        )
    }

    @Test func httpURLsAreParsedLikeWebSocketURLs() throws {
        #expect(try HTTPURL("https://[::1]/g?x=1").description == "https://[::1]/g?x=1")
        #expect(throws: UpstreamURLError.self) { try HTTPURL("ws://h/g") }
        #expect(throws: UpstreamURLError.self) { try HTTPURL("http://h:0/g") }
    }
}
