/// A parsed `ws://` or `wss://` endpoint.
package struct UpstreamURL: Sendable, Equatable, CustomStringConvertible {
    package var secure: Bool
    package var host: String
    package var port: Int
    /// Path and query, as sent in the request line.
    package var target: String

    package var description: String {
        let defaultPort = secure ? 443 : 80
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return (secure ? "wss://" : "ws://") + shownHost + (port == defaultPort ? "" : ":\(port)") + target
    }

    /// The Host header value.
    package var hostHeader: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? shownHost : "\(shownHost):\(port)"
    }

    /// Parses `ws[s]://host[:port][/path][?query]`.
    /// - Throws: ``UpstreamURLError`` naming what is wrong.
    package init(_ string: String) throws(UpstreamURLError) {
        let secure: Bool
        let rest: Substring
        if string.hasPrefix("ws://") {
            secure = false
            rest = string.dropFirst(5)
        } else if string.hasPrefix("wss://") {
            secure = true
            rest = string.dropFirst(6)
        } else {
            throw UpstreamURLError("\(named(string)) must start with ws:// or wss://")
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...])
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        if target.isEmpty || target.hasPrefix("?") { target = "/" + target }
        // A reload's error reaches STATUS=, which every local user reads: each message names the
        // URL as `named` does (never its query, never anything of a URL that holds an `@`).
        guard !rest.prefix(while: { $0 != "?" && $0 != "#" }).contains("@") else {
            throw UpstreamURLError(
                "\(named(string)) has user info or an '@' before its query, which is not supported (send credentials in headers; write an '@' in the path as %40)"
            )
        }
        guard !authority.isEmpty else { throw UpstreamURLError("\(named(string)) has no host") }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw UpstreamURLError("\(named(string)) has an unclosed IPv6 address") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw UpstreamURLError("\(named(string)) has garbage after the IPv6 address")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw UpstreamURLError("\(named(string)) has no host") }
        var port = secure ? 443 : 80
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw UpstreamURLError("\(named(string)) has an invalid port" + (string.contains("@") ? "" : " '\(portText)'"))
            }
            port = value
        }
        self.secure = secure
        self.host = String(host)
        self.port = port
        self.target = target
    }
}

package struct UpstreamURLError: Error, Equatable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

/// A URL as an error message may name it, quoted: without its query and fragment (``shownURL``),
/// or not at all when it holds an `@` anywhere, since user info is never shown, whatever
/// characters (`/`, `?`, `#`) its password holds.
func named(_ string: String) -> String {
    string.contains("@") ? "the URL" : "'\(shownURL(string))'"
}
