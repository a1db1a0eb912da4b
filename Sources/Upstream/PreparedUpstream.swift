import NIOCore
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

/// An upstream configuration with its file I/O already done: the TLS client contexts (which
/// read `tls.ca_file`) and, when asked, a check of `connecting_payload_file`. Built off the
/// event loop (blocking); applying one to a running transport cannot fail, so a reload is
/// applied whole or not at all.
package struct PreparedUpstream: Sendable {
    package let configuration: UpstreamConfiguration
    /// For the WebSocket `url` (nil for ws://).
    package let websocketTLS: NIOSSLContext?
    /// For `http_url` (nil when unset or http://).
    package let httpTLS: NIOSSLContext?
    /// For HTTP streams to `http_url` (`transport` multipart or sse): offers `h2` and
    /// `http/1.1` in ALPN. Nil for websocket, or http://.
    package let streamTLS: NIOSSLContext?

    /// A preparation failure, naming the key: `[upstream.tls] ca_file: …`.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The same upstream, its TLS contexts reused, carrying `credential` (an identity's lane):
    /// no file I/O, so a lane is made on the loop.
    package func carrying(_ credential: LaneCredential) -> PreparedUpstream {
        PreparedUpstream(credential.applied(to: configuration), websocketTLS: websocketTLS, httpTLS: httpTLS, streamTLS: streamTLS)
    }

    private init(_ configuration: UpstreamConfiguration, websocketTLS: NIOSSLContext?, httpTLS: NIOSSLContext?, streamTLS: NIOSSLContext?) {
        self.configuration = configuration
        self.websocketTLS = websocketTLS
        self.httpTLS = httpTLS
        self.streamTLS = streamTLS
    }

    /// Blocking: reads the CA file (once per secure endpoint) and, with `checkPayloadFile`, a
    /// regular `connecting_payload_file` (a FIFO or device is left for the connect to read:
    /// reading it here would consume what a credentials helper writes for the connect).
    /// Reads each `header_files` file too, into the configuration's headers (a file rotated
    /// before a reload is read by it).
    package init(_ configuration: UpstreamConfiguration, checkPayloadFile: Bool) throws(Failure) {
        self.configuration = try Self.readingHeaderFiles(configuration)
        do {
            websocketTLS = try configuration.tls.clientContext(secure: configuration.url.secure)
            httpTLS = try configuration.httpURL.flatMap { try configuration.tls.clientContext(secure: $0.secure, alpn: ["h2", "http/1.1"]) }
            streamTLS =
                configuration.carrier.usesWebSocket
                ? nil : try configuration.httpURL.flatMap { try configuration.tls.clientContext(secure: $0.secure, alpn: ["h2", "http/1.1"]) }
        } catch {
            throw Failure(description: "[upstream.tls] ca_file: \(configuration.tls.caFile ?? "system trust store"): \(error)")
        }
        if checkPayloadFile, case .file(let path) = configuration.connectingPayload {
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw Failure(description: "[upstream] connecting_payload_file: cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if (info.st_mode & S_IFMT) == S_IFREG {
                do {
                    _ = try ConnectingPayloadReader.read(configuration.connectingPayload)
                } catch {
                    throw Failure(description: "[upstream] \(error)")
                }
            }
        }
    }

    /// `configuration` with each header file's value in its headers, replacing what an earlier
    /// preparation put there.
    private static func readingHeaderFiles(_ configuration: UpstreamConfiguration) throws(Failure) -> UpstreamConfiguration {
        guard !configuration.headerFiles.isEmpty else { return configuration }
        var resolved = configuration
        let names = Set(configuration.headerFiles.map { $0.name.lowercased() })
        resolved.headers.removeAll { names.contains($0.name.lowercased()) }
        for (name, path) in configuration.headerFiles {
            do {
                resolved.headers.append((name, try ConnectingPayloadReader.readHeaderValue(path, naming: "header_files \(name)")))
            } catch {
                throw Failure(description: "[upstream] \(error)")
            }
        }
        return resolved
    }
}
