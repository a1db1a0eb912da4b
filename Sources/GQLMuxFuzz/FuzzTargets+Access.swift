import GQLMuxVocabulary
import HTTPFields
import LocalEndpoint
import NIOCore

extension FuzzTargets {
    private static let access = EndpointAccess(allowedHosts: ["gqlmux.internal", "box:8080"], allowedOrigins: ["http://127.0.0.3:8000"])
    private static let token = EndpointToken(fileContents: "0123456789abcdef-token")!

    /// The endpoint's request checks: the input's lines are a request's `Host`, `Origin`,
    /// `Sec-Fetch-Site`, `Authorization`, `Content-Type` and `Accept` values, then a
    /// `connection_init` payload. Invariants: a request is served only with a loopback or
    /// allowed Host and no Origin or an allowed one (never `null`), and never when a page of
    /// another site sent it; only the exact token passes; `application/json` is matched exactly.
    /// (Lines end at `\n` only, so a value may hold `\r`, as a header value cannot.)
    public static func endpointHeaders(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        var lines = text.split(separator: "\n", maxSplits: 6, omittingEmptySubsequences: false).map(String.init)
        while lines.count < 7 { lines.append("") }
        let origin = lines[1].isEmpty ? [] : lines[1].split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        let site = lines[2].isEmpty ? [] : [lines[2]]
        let decision = access.check(.init(host: [lines[0]], origin: origin, secFetchSite: site))
        if case .allow(let cors) = decision {
            let host = EndpointAccess.parseHost(lines[0])
            precondition(host != nil, "served a request whose Host does not parse")
            precondition(
                EndpointAccess.isLoopbackName(host!.name) || access.allowedHosts.contains(host!.name)
                    || access.allowedHosts.contains(host!.name + ":" + (host!.port ?? "")),
                "served a foreign Host"
            )
            if origin.isEmpty {
                precondition(cors == nil, "CORS granted without an Origin")
                let fetchSite = site.first?.lowercased().trimming() ?? ""
                precondition(fetchSite != "cross-site" && fetchSite != "same-site", "served a page of another site")
            } else {
                precondition(origin.count == 1 && cors == origin[0].trimming(), "CORS for an origin other than the request's")
                precondition(cors!.lowercased() != "null", "served Origin null")
                precondition(access.allowedOrigins.contains(EndpointAccess.normalizeOrigin(cors!) ?? ""), "served a foreign Origin")
            }
        }
        if token.check(authorization: [lines[3]]) == .valid {
            let words = lines[3].trimming(" \t\r\n").split(separator: " ", omittingEmptySubsequences: true)
            precondition(words.count == 2 && words[0].lowercased() == "bearer" && words[1] == "0123456789abcdef-token", "a wrong token passed")
        }
        if let type = MediaType(lines[4]), type.isJSON {
            let essence = lines[4].split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            precondition(essence.lowercased().trimming() == "application/json", "a media type taken for JSON")
        }
        _ = MediaType.list(lines[5])
        // A payload may spell the token with JSON escapes: only exercised here (the unit tests
        // check which payloads pass).
        _ = token.accepts(initPayload: ByteBuffer(string: lines[6]))
    }
}
