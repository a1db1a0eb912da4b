import FoundationEssentials
import GQLMuxVocabulary
import HTTPFields

/// An HTTP proxy that every upstream connection is tunnelled through with `CONNECT`
/// (`[upstream] proxy = "http://[user:password@]host:port"`, or the `https_proxy`/`http_proxy`
/// environment). User and password are percent-encoded in the URL and sent as
/// `Proxy-Authorization: Basic`.
package struct HTTPProxy: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: Int
    /// The `Proxy-Authorization` value, when the URL names a user.
    package var authorization: String?

    /// `host:port`, for messages: never the credentials.
    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    package struct ParseError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Parses `http://[user:password@]host[:port]` (port 80 when absent). A value without a
    /// scheme is taken as `http://` (a common spelling of the environment variables).
    package init(parsing text: String) throws(ParseError) {
        var rest = Substring(text.trimming(" \t"))
        if let scheme = rest.firstRange(of: "://") {
            guard rest[..<scheme.lowerBound].lowercased() == "http" else {
                throw ParseError(description: "'\(Self.redacted(text))' is not an http:// proxy (HTTPS and SOCKS proxies are not supported)")
            }
            rest = rest[scheme.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else { throw ParseError(description: "'\(Self.redacted(text))': a proxy URL has no path") }
            rest = rest[..<slash]
        }
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let (user, password) = userinfo.firstIndex(of: ":").map { (userinfo[..<$0], userinfo[userinfo.index(after: $0)...]) } ?? (userinfo, "")
            guard let user = Self.percentDecoded(user), let password = Self.percentDecoded(password) else {
                throw ParseError(description: "'\(Self.redacted(text))': bad percent-encoding in the user or password")
            }
            authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        } else {
            authorization = nil
        }
        let hostPart: Substring
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw ParseError(description: "'\(Self.redacted(text))': unclosed [") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portPart = after.dropFirst()
            } else if !after.isEmpty {
                throw ParseError(description: "'\(Self.redacted(text))': not host:port")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        } else {
            hostPart = rest
        }
        guard !hostPart.isEmpty, !hostPart.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) else {
            throw ParseError(description: "'\(Self.redacted(text))': no proxy host")
        }
        host = String(hostPart)
        if let portPart {
            guard let port = Int(portPart), (1...65535).contains(port) else {
                throw ParseError(description: "'\(Self.redacted(text))': the port must be 1-65535")
            }
            self.port = port
        } else {
            port = 80
        }
    }

    /// The URL for error messages (which reach STATUS=): its user info replaced, up to the last
    /// `@`, and its query and fragment left out.
    static func redacted(_ text: String) -> String {
        let start = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        var shown = text.lastIndex(of: "@").map { String(text[..<start]) + "***" + String(text[$0...]) } ?? text
        if let query = shown.firstIndex(where: { $0 == "?" || $0 == "#" }) { shown = String(shown[..<query]) }
        return shown
    }

    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Which proxy, if any, carries a connection to the upstream.
package enum ProxyChoice: Sendable, Equatable {
    /// `[upstream] proxy = ""`, or no key and no proxy in the environment: connect directly.
    case direct
    /// `[upstream] proxy`: every connection, whatever its host.
    case always(HTTPProxy)
    /// No key: the environment's `https_proxy` (TLS upstreams) or `http_proxy` (plain ones),
    /// except for the hosts `no_proxy` names.
    case environment(https: HTTPProxy?, http: HTTPProxy?, noProxy: [String])

    /// Reads the conventional variables (lower case first, as curl does).
    /// - Throws: when a variable is set to something that is not an http:// proxy.
    package static func fromEnvironment(_ environment: [String: String]) throws(HTTPProxy.ParseError) -> ProxyChoice {
        func value(_ name: String) -> (String, String)? {
            for key in [name, name.uppercased()] {
                if let value = environment[key], !value.trimming(" \t").isEmpty { return (key, value) }
            }
            return nil
        }
        func proxy(_ name: String) throws(HTTPProxy.ParseError) -> HTTPProxy? {
            guard let (key, text) = value(name) else { return nil }
            do {
                return try HTTPProxy(parsing: text)
            } catch {
                throw HTTPProxy.ParseError(description: "\(key): \(error.description)")
            }
        }
        let https = try proxy("https_proxy")
        let http = try proxy("http_proxy")
        guard https != nil || http != nil else { return .direct }
        let noProxy = value("no_proxy").map { $0.1.split(separator: ",").map { $0.trimming(" \t").lowercased() }.filter { !$0.isEmpty } } ?? []
        return .environment(https: https, http: http, noProxy: noProxy)
    }

    /// The proxy for a connection to `host:port`; nil to connect directly.
    package func proxy(host: String, port: Int, secure: Bool) -> HTTPProxy? {
        switch self {
        case .direct: return nil
        case .always(let proxy): return proxy
        case .environment(let https, let http, let noProxy):
            guard let proxy = secure ? https : http else { return nil }
            return Self.bypasses(host: host, port: port, noProxy: noProxy) ? nil : proxy
        }
    }

    /// `no_proxy` as curl reads it: `*` is every host; `name` or `.name` is that host and its
    /// subdomains; an address matches itself; `entry:port` only that port.
    static func bypasses(host: String, port: Int, noProxy: [String]) -> Bool {
        let host = host.lowercased().trimming("[]")
        for entry in noProxy {
            if entry == "*" { return true }
            var name = Substring(entry)
            if let colon = name.lastIndex(of: ":"), !name.hasPrefix("["), name.firstIndex(of: ":") == colon {
                guard Int(name[name.index(after: colon)...]) == port else { continue }
                name = name[..<colon]
            }
            name = Substring(name.trimming("[]"))
            if name.hasPrefix(".") { name = name.dropFirst() }
            if host == name || host.hasSuffix("." + name) { return true }
        }
        return false
    }
}
