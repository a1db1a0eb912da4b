/// A parsed `http://` or `https://` endpoint (`[upstream] http_url`).
package struct HTTPURL: Sendable, Equatable, CustomStringConvertible {
    package var secure: Bool
    package var host: String
    package var port: Int
    package var target: String

    /// Parses `http[s]://host[:port][/path][?query]` with the WebSocket URL's rules.
    package init(_ string: String) throws(UpstreamURLError) {
        let scheme: (from: String, to: String)
        if string.hasPrefix("http://") {
            scheme = ("http://", "ws://")
        } else if string.hasPrefix("https://") {
            scheme = ("https://", "wss://")
        } else {
            throw UpstreamURLError("\(named(string)) must start with http:// or https://")
        }
        let parsed: UpstreamURL
        do {
            parsed = try UpstreamURL(scheme.to + string.dropFirst(scheme.from.count))
        } catch {
            throw UpstreamURLError(error.description.replacing(scheme.to, with: scheme.from))
        }
        secure = parsed.secure
        host = parsed.host
        port = parsed.port
        target = parsed.target
    }

    package var hostHeader: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? shownHost : "\(shownHost):\(port)"
    }

    package var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return (secure ? "https://" : "http://") + shownHost + (port == (secure ? 443 : 80) ? "" : ":\(port)") + target
    }
}

/// `url` as every local user may see it (`status`, `STATUS=`, an app's error message): without
/// its query string, fragment and user info, where some servers take a key
/// (`wss://user:pass@host/graphql?apikey=K` → `wss://host/graphql`).
package func shownURL(_ url: String) -> String {
    var shown = Substring(url.prefix { $0 != "?" && $0 != "#" })
    if let scheme = shown.firstRange(of: "://") {
        let authorityEnd = shown[scheme.upperBound...].firstIndex(of: "/") ?? shown.endIndex
        if let at = shown[scheme.upperBound..<authorityEnd].lastIndex(of: "@") {
            shown.removeSubrange(scheme.upperBound...at)
        }
    }
    return String(shown)
}
