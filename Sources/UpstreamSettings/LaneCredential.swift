import GQLMuxVocabulary
import NIOCore

/// What one identity presents upstream, in place of the configured connecting payload and on
/// top of the configured headers: a client's own (`identity = "client"`) or the file a local
/// peer's uid or gid names (`identity = "peer"`). Equal credentials share connections; the
/// value is a secret, never logged or shown (``shortHash`` names it).
package struct LaneCredential: Hashable, Sendable {
    package enum Payload: Hashable, Sendable {
        /// The configured connecting payload (no payload was presented).
        case configured
        /// A JSON object, as presented.
        case inline([UInt8])
        /// A file read at every connect.
        case file(String)
    }

    package var payload: Payload
    /// Header names lowercased, sorted by name; values as presented.
    package private(set) var headers: [Header]

    package typealias Header = HeaderField

    package init(payload: Payload = .configured, headers: [Header] = []) {
        self.payload = payload
        self.headers = headers.map { Header(name: $0.name.lowercased(), value: $0.value) }.sorted { ($0.name, $0.value) < ($1.name, $1.value) }
    }

    /// Whether its payload is a file, read at every connect.
    package var readsFile: Bool {
        if case .file = payload { return true }
        return false
    }

    /// `configuration` carrying this credential: its payload instead of the configured one, its
    /// headers instead of configured ones of the same name.
    package func applied(to configuration: UpstreamConfiguration) -> UpstreamConfiguration {
        var c = configuration
        switch payload {
        case .configured: break
        case .inline(let bytes): c.connectingPayload = .inline(ByteBuffer(bytes: bytes))
        case .file(let path): c.connectingPayload = .file(path)
        }
        let names = Set(headers.map(\.name))
        c.headers = c.headers.filter { !names.contains($0.name.lowercased()) } + headers.map { ($0.name, $0.value) }
        return c
    }
}
