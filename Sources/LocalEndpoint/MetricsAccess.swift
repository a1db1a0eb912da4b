import NIOCore

/// Who may read `[metrics] listen`: Prometheus and curl, not a web page. Pure, decided from a
/// request's headers alone, as ``EndpointAccess`` decides for the endpoint.
///
/// - `Host` must be one: a loopback name or address, an IP address literal, or the configured
///   listen host (any port). A page that re-points its own DNS name at this machine (DNS
///   rebinding) sends that name, which is none of these.
/// - A request that carries `Origin` or says `Sec-Fetch-Site: cross-site` / `same-site` comes
///   from a web page, and is refused.
package struct MetricsAccess: Sendable, Equatable {
    /// The configured listen host (a name or an address), lower-cased.
    package var listenHost: String

    package init(listenHost: String) {
        self.listenHost = listenHost.lowercased()
    }

    /// nil when the request may be served; else the status and why.
    package func refusal(host: [String], origin: [String], secFetchSite: [String]) -> (status: Int, message: String)? {
        guard host.count == 1, let parsed = EndpointAccess.parseHost(host[0]) else {
            return (400, "the request needs one valid Host header")
        }
        let name = parsed.name
        let literal = name.hasPrefix("[") || (try? SocketAddress(ipAddress: name, port: 0)) != nil
        guard EndpointAccess.isLoopbackName(name) || literal || name == listenHost || "[\(listenHost)]" == name else {
            return (403, "Host '\(EndpointAccess.printable(host[0]))' is neither this machine's address nor [metrics] listen's host")
        }
        let site = secFetchSite.map { $0.lowercased() }
        guard origin.isEmpty, !site.contains(where: { $0.contains("cross-site") || $0.contains("same-site") }) else {
            return (403, "the metrics are not served to web pages")
        }
        return nil
    }
}
