import GQLMuxVocabulary
import HTTPFields
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
        if let appSync = c.appSync {
            c.appSync?.auth = appSync.auth.with(appSyncSource(appSync.auth))
        }
        return c
    }

    /// Where an AppSync lane's key or token comes from: the peer's file, else the app's own
    /// header (`x-api-key` or `authorization`), else nowhere. Never the host's.
    private func appSyncSource(_ auth: AppSyncSettings.Auth) -> AppSyncSettings.SecretSource {
        if case .file(let path) = payload { return .file(path) }
        guard let name = auth.presentedHeader, let header = headers.first(where: { $0.name == name }) else { return .identity }
        return .presented(header.value)
    }
}
