import GQLMuxVocabulary
import HTTPFields

/// Who may use the local GraphQL endpoint, decided from a request's headers alone. Pure: the
/// same checks guard every HTTP request and every WebSocket upgrade, on the Unix socket and on
/// the TCP port.
///
/// - `Host` must name this machine by a loopback name or address (`localhost`, `127.0.0.0/8`,
///   `[::1]`, any port) or be in `allowed_hosts`: a page whose DNS name was re-pointed at
///   127.0.0.1 (DNS rebinding) still sends its own name.
/// - A request that carries `Origin` (even `null`, from a sandboxed frame or a `data:` page) or
///   says `Sec-Fetch-Site: cross-site` / `same-site` comes from a web page; it is served only
///   when its origin is in `allowed_origins`. WebSockets are not bound by the same-origin
///   policy, so this is the only thing that stops a page's socket.
/// - Clients that are not browsers send neither header and are unaffected.
package struct EndpointAccess: Sendable, Equatable {
    /// Extra `Host` names: `name` (any port) or `name:port`, lower-cased.
    package var allowedHosts: [String]
    /// Origins allowed to use the endpoint from a browser, serialized as browsers send them
    /// (`scheme://host[:port]`, lower-cased, without a default port).
    package var allowedOrigins: [String]

    package init(allowedHosts: [String] = [], allowedOrigins: [String] = []) {
        self.allowedHosts = allowedHosts
        self.allowedOrigins = allowedOrigins
    }

    /// Why a request was refused, for the journal and the answer.
    package enum Refusal: String, Sendable, Equatable {
        /// No `Host`, or more than one.
        case missingHost = "missing_host"
        /// A `Host` that is not this machine's loopback name nor in `allowed_hosts`.
        case foreignHost = "foreign_host"
        /// An `Origin` (or `Sec-Fetch-Site`) from a page not in `allowed_origins`.
        case foreignOrigin = "foreign_origin"
    }

    package enum Decision: Sendable, Equatable {
        /// Serve it. `corsOrigin`: the allowed origin to echo in `Access-Control-Allow-Origin`.
        case allow(corsOrigin: String?)
        case refuse(status: Int, reason: Refusal, message: String)
    }

    /// The headers the checks read (each as every value the request carried).
    package struct Headers: Sendable {
        package var host: [String]
        package var origin: [String]
        package var secFetchSite: [String]
        package init(host: [String], origin: [String] = [], secFetchSite: [String] = []) {
            self.host = host
            self.origin = origin
            self.secFetchSite = secFetchSite
        }
    }

    /// The decision for one request or upgrade.
    package func check(_ headers: Headers) -> Decision {
        guard headers.host.count == 1, let host = Self.parseHost(headers.host[0]) else {
            return .refuse(status: 400, reason: .missingHost, message: "the request needs one valid Host header")
        }
        guard Self.isLoopbackName(host.name) || allows(host: host) else {
            return .refuse(
                status: 403,
                reason: .foreignHost,
                message:
                    "Host '\(Self.printable(headers.host[0]))' is not this machine's loopback address; add it to [graphql_endpoint] allowed_hosts to serve it"
            )
        }
        let site = headers.secFetchSite.map { $0.lowercased().trimming() }
        let fromPage = site.contains("cross-site") || site.contains("same-site")
        guard !headers.origin.isEmpty else {
            if fromPage {
                return .refuse(status: 403, reason: .foreignOrigin, message: "a request from another site (Sec-Fetch-Site) is not served")
            }
            return .allow(corsOrigin: nil)
        }
        guard headers.origin.count == 1 else {
            return .refuse(status: 403, reason: .foreignOrigin, message: "the request carries more than one Origin")
        }
        let origin = headers.origin[0].trimming()
        guard origin.lowercased() != "null", let normalized = Self.normalizeOrigin(origin), allowedOrigins.contains(normalized) else {
            return .refuse(
                status: 403,
                reason: .foreignOrigin,
                message: "Origin '\(Self.printable(origin))' is not in [graphql_endpoint] allowed_origins"
            )
        }
        return .allow(corsOrigin: origin)
    }

    private func allows(host: (name: String, port: String?)) -> Bool {
        allowedHosts.contains { entry in
            entry == host.name || (host.port.map { entry == host.name + ":" + $0 } ?? false)
        }
    }

    // MARK: - Host

    /// `name[:port]` or `[v6][:port]`, lower-cased; nil when malformed.
    package static func parseHost(_ value: String) -> (name: String, port: String?)? {
        let text = value.trimming().lowercased()
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        var name: Substring
        var port: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[...close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == ":" else { return nil }
                port = rest.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            name = text[..<colon]
            port = text[text.index(after: colon)...]
        } else {
            name = Substring(text)
        }
        if let port, port.isEmpty || port.count > 5 || !port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return nil }
        guard !name.isEmpty, !name.contains(":") || name.hasPrefix("[") else { return nil }
        return (String(name), port.map(String.init))
    }

    /// `localhost`, a dotted-quad in 127.0.0.0/8, or `[::1]` (any spelling of it).
    package static func isLoopbackName(_ name: String) -> Bool {
        if name == "localhost" { return true }
        if name.hasPrefix("[") && name.hasSuffix("]") {
            return isIPv6Loopback(name.dropFirst().dropLast())
        }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } && Int(part)! <= 255
        }
    }

    /// `::1`, `0:0:0:0:0:0:0:1`, `0000::1` and the like.
    private static func isIPv6Loopback(_ text: Substring) -> Bool {
        let halves = text.split(separator: "::", omittingEmptySubsequences: false)
        let groups: [Substring]
        if halves.count == 2 {
            let head = halves[0].isEmpty ? [] : halves[0].split(separator: ":", omittingEmptySubsequences: false)
            let tail = halves[1].isEmpty ? [] : halves[1].split(separator: ":", omittingEmptySubsequences: false)
            guard head.count + tail.count < 8 else { return false }
            groups = head + Array(repeating: "0", count: 8 - head.count - tail.count) + tail
        } else if halves.count == 1 {
            groups = text.split(separator: ":", omittingEmptySubsequences: false)
        } else {
            return false
        }
        guard groups.count == 8 else { return false }
        let values = groups.map { $0.count <= 4 ? UInt16($0, radix: 16) : nil }
        guard values.allSatisfy({ $0 != nil }) else { return false }
        return values.dropLast().allSatisfy { $0 == 0 } && values.last! == 1
    }

    // MARK: - Origins

    /// `scheme://host[:port]` lower-cased, its scheme's default port dropped; nil when the text
    /// is not a serialized http(s) origin (a path, a user, `null`).
    package static func normalizeOrigin(_ text: String) -> String? {
        let lower = text.lowercased()
        let scheme: String
        let defaultPort: String
        if lower.hasPrefix("http://") {
            (scheme, defaultPort) = ("http", "80")
        } else if lower.hasPrefix("https://") {
            (scheme, defaultPort) = ("https", "443")
        } else {
            return nil
        }
        let authority = String(lower.dropFirst(scheme.count + 3))
        guard !authority.contains("/"), !authority.contains("@"), !authority.contains("?"), !authority.contains("#"),
            let host = parseHost(authority)
        else { return nil }
        let port = host.port == defaultPort ? nil : host.port
        return scheme + "://" + host.name + (port.map { ":" + $0 } ?? "")
    }

    /// At most 100 printable ASCII characters of a header, for messages and the journal.
    package static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(100).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }))
    }
}
