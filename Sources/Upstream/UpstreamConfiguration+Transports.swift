import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPStreaming
import NIOSSL

/// What the upstream's I/O makes of its settings: the TLS context of a secure endpoint.
extension UpstreamConfiguration.TLS {
    /// The TLS client context for a `secure` endpoint (nil for plain ws:// or http://), the
    /// same for the WebSocket and `http_url`. Throws if `caFile` cannot be read.
    /// - Parameter alpn: protocols offered in ALPN (`h2`, `http/1.1` for HTTP streams).
    func clientContext(secure: Bool, alpn: [String] = []) throws -> NIOSSLContext? {
        guard secure else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = alpn
        if let caFile {
            tls.additionalTrustRoots = [.file(caFile)]
            _ = try NIOSSLCertificate.fromPEMFile(caFile)
        }
        if insecureSkipVerify { tls.certificateVerification = .none }
        return try NIOSSLContext(configuration: tls)
    }
}

/// What the upstream's I/O makes of its settings: each side's proxy and configuration.
extension UpstreamConfiguration {
    /// The proxy of the WebSocket connections to `url`.
    var websocketProxy: HTTPProxy? { proxy.proxy(host: url.host, port: url.port, secure: url.secure) }

    /// The HTTP streaming side's settings when `transport` is `multipart` or `sse`; nil for
    /// `websocket`. Headers (client awareness included), backoff and timings as the WebSocket's.
    package var httpStreams: HTTPStreamTransport.Configuration? {
        guard let httpURL else { return nil }
        let flavor: HTTPStreamTransport.Flavor
        switch carrier {
        case .websocket, .appsync: return nil
        case .multipart: flavor = .multipart(accept: multipartAccept)
        case .sse: flavor = .sse
        }
        var options = StreamMachine.Options()
        options.backoff = transport.backoff
        options.connectTimeout = transport.connectTimeout
        options.heartbeatTimeout = heartbeatTimeout
        options.healthyAfter = transport.healthyAfter
        return HTTPStreamTransport.Configuration(
            url: httpURL,
            headers: upgradeHeaders,
            flavor: flavor,
            options: options,
            maxMessageBytes: maxMessageBytes,
            maxStreams: maxStreams,
            reconnectIfConnected: reconnectIfConnected,
            proxy: proxy.proxy(host: httpURL.host, port: httpURL.port, secure: httpURL.secure)
        )
    }

    /// The HTTP side's settings: the same headers (client awareness included), TLS and size limit.
    package var httpOperations: HTTPOperations.Configuration? {
        httpURL.map {
            var settings = HTTPOperations.Configuration(
                url: $0,
                headers: upgradeHeaders,
                tls: tls,
                timeout: httpTimeout,
                maxResponseBytes: maxMessageBytes,
                proxy: proxy.proxy(host: $0.host, port: $0.port, secure: $0.secure)
            )
            settings.appSync = appSync
            return settings
        }
    }
}
