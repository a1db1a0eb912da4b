import GQLMuxVocabulary
import HTTPFields
import JSONEnvelope
import NIOCore

/// What one gqlmuxd process leaves the next when it restarts under systemd: its clients'
/// connections are kept open in the service manager's file descriptor store, and this record,
/// stored beside them in a memory file, says what each one is. The next process reads it,
/// adopts each connection, and subscribes again to everything the clients had open.
///
/// A client is found again by its socket's cookie (`SO_COOKIE`): the kernel's name for the
/// socket, the same in every process that holds it, so the order in which the store passes
/// the descriptors back does not matter.
///
/// On disk: one header line, `gqlmux-handover <version> <body bytes> <FNV-1a 64 of the body,
/// hex>`, then the body, one JSON object. A record of another version, cut short or damaged is
/// refused whole (``Unreadable``): the next process then closes what it was passed and starts
/// clean, never half-adopting.
package struct HandoverState: Equatable, Sendable {
    package static let format = "gqlmux-handover"
    /// Bumped whenever the record's meaning changes. Version 2 adds ``laneCredentials``: a
    /// record that holds none is written as version 1, byte for byte, so an older gqlmuxd adopts
    /// it; one that holds some is version 2, which an older gqlmuxd refuses whole (it would
    /// resume every subscription with its client's latest credential). This one reads both.
    package static let version = 1
    package static let versionWithLaneCredentials = 2

    /// When the previous process told its line-protocol clients `reconnecting` (the system's
    /// monotonic clock, the same in both processes): the start of their gap.
    package var handedAt: Instant
    package var clients: [Client]
    /// Credentials subscriptions were made with before their client presented its latest one,
    /// one per identity lane, named by index (``Subscription/credential``): each resumes with
    /// its own. At most one per identity (`max_identities`).
    package var laneCredentials: [Client.Credential]

    package init(handedAt: Instant, clients: [Client], laneCredentials: [Client.Credential] = []) {
        self.handedAt = handedAt
        self.clients = clients
        self.laneCredentials = laneCredentials
    }

    /// One client connection as the next process must rebuild it.
    package struct Client: Equatable, Sendable {
        /// The socket's `SO_COOKIE`.
        package var cookie: UInt64
        package var origin: ClientOrigin
        package var kind: Kind
        /// The name it gave in `connection_init` (logs only).
        package var name: String
        /// A WebSocket client's `connection_init` was acknowledged.
        package var acknowledged: Bool
        package var subscriptions: [Subscription]
        /// The upstream an endpoint WebSocket's path names (nil: `default`).
        package var upstream: String?
        /// What the client presented for `identity = "client"` upstreams: its payload (JSON
        /// text) and headers. A secret: it travels only inside this record.
        package var presentedPayload: String?
        package var presentedHeaders: [Header]
        /// When it first connected (Unix time, milliseconds), for the operator's view; nil in a
        /// record written before it was kept.
        package var connectedAtMs: Int?
        /// Online restarts it was carried across before this one.
        package var restarts: Int?

        package typealias Header = HeaderField

        /// A presented credential: its payload (JSON text) and headers. A secret.
        package struct Credential: Equatable, Sendable {
            package var payload: String?
            package var headers: [Header]

            package init(payload: String? = nil, headers: [Header] = []) {
                self.payload = payload
                self.headers = headers
            }
        }

        package init(
            cookie: UInt64,
            origin: ClientOrigin,
            kind: Kind,
            name: String = "",
            acknowledged: Bool = true,
            subscriptions: [Subscription] = [],
            upstream: String? = nil,
            presentedPayload: String? = nil,
            presentedHeaders: [Header] = [],
            connectedAtMs: Int? = nil,
            restarts: Int? = nil
        ) {
            self.cookie = cookie
            self.origin = origin
            self.kind = kind
            self.name = name
            self.acknowledged = acknowledged
            self.subscriptions = subscriptions
            self.upstream = upstream
            self.presentedPayload = presentedPayload
            self.presentedHeaders = presentedHeaders
            self.connectedAtMs = connectedAtMs
            self.restarts = restarts
        }
    }

    /// The protocol a carried connection speaks, past any HTTP upgrade.
    package enum Kind: String, Sendable, CaseIterable {
        /// Local protocol v1, on the line socket.
        case line
        /// An endpoint WebSocket, graphql-transport-ws.
        case transportWS = "graphql-transport-ws"
        /// An endpoint WebSocket, graphql-ws (subscriptions-transport-ws).
        case legacyWS = "graphql-ws"
        /// An endpoint HTTP response streaming a subscription as server-sent events; its one
        /// subscription's id is the stream's.
        case sse
        /// The same as an Apollo multipart response.
        case multipart
    }

    /// One open subscription: the client's id for it, the payload that went upstream, and the
    /// query it named for resumes.
    package struct Subscription: Equatable, Sendable {
        package var id: String
        /// JSON text.
        package var payload: String
        /// JSON text of the resnapshot query's payload.
        package var snapshot: String?
        /// The upstream it reads (nil: `default`).
        package var upstream: String?
        /// The credential it was made with, as an index into the record's
        /// ``HandoverState/laneCredentials``; nil: its client's latest.
        package var credential: Int?

        package init(id: String, payload: String, snapshot: String? = nil, upstream: String? = nil, credential: Int? = nil) {
            self.id = id
            self.payload = payload
            self.snapshot = snapshot
            self.upstream = upstream
            self.credential = credential
        }
    }

    /// Why a stored record was not used.
    package struct Unreadable: Error, Equatable, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    // MARK: - Writing

    /// The record's bytes, header included.
    package func encoded() -> [UInt8] {
        var writer = JSONObjectWriter()
        writer.field("handedAtNs", Int(handedAt.nanoseconds))
        writer.field(
            "clients",
            objects: clients.map { client in
                { (out: inout JSONObjectWriter) in
                    out.field("cookie", String(client.cookie))
                    out.field("origin", client.origin.rawValue)
                    out.field("kind", client.kind.rawValue)
                    out.field("name", client.name)
                    out.field("acknowledged", client.acknowledged ? 1 : 0)
                    if let upstream = client.upstream { out.field("upstream", upstream) }
                    if let payload = client.presentedPayload { out.field("presentedPayload", payload) }
                    if !client.presentedHeaders.isEmpty { Self.writeHeaders(client.presentedHeaders, as: "presentedHeaders", to: &out) }
                    if let connectedAtMs = client.connectedAtMs { out.field("connectedAtMs", connectedAtMs) }
                    if let restarts = client.restarts { out.field("restarts", restarts) }

                    out.field(
                        "subscriptions",
                        objects: client.subscriptions.map { subscription in
                            { (out: inout JSONObjectWriter) in
                                out.field("id", subscription.id)
                                out.field("payload", subscription.payload)
                                out.field("snapshot", subscription.snapshot)
                                if let upstream = subscription.upstream { out.field("upstream", upstream) }
                                if let credential = subscription.credential { out.field("credential", credential) }
                            }
                        }
                    )
                }
            }
        )
        if !laneCredentials.isEmpty {
            writer.field(
                "laneCredentials",
                objects: laneCredentials.map { credential in
                    { (out: inout JSONObjectWriter) in
                        if let payload = credential.payload { out.field("payload", payload) }
                        Self.writeHeaders(credential.headers, as: "headers", to: &out)
                    }
                }
            )
        }
        let version = laneCredentials.isEmpty ? Self.version : Self.versionWithLaneCredentials
        return Self.record(body: Array(writer.finish().readableBytesView), version: version)
    }

    private static func writeHeaders(_ headers: [Client.Header], as name: String, to out: inout JSONObjectWriter) {
        out.field(
            name,
            objects: headers.map { header in
                { (out: inout JSONObjectWriter) in
                    out.field("name", header.name)
                    out.field("value", header.value)
                }
            }
        )
    }

    /// `body` under this version's header (its length and checksum): what ``encoded()``
    /// writes, and how the fuzzer reaches the parser behind the checksum.
    package static func record(body: [UInt8], version: Int = version) -> [UInt8] {
        Array("\(format) \(version) \(body.count) \(hex(fnv1a64(body)))\n".utf8) + body
    }

    // MARK: - Reading

    /// The record in `bytes`.
    /// - Throws: ``Unreadable`` for another format or version, a wrong length or checksum, or
    ///   a body that is not the record.
    package init(decoding bytes: [UInt8]) throws(Unreadable) {
        guard let newline = bytes.prefix(200).firstIndex(of: UInt8(ascii: "\n")) else { throw Unreadable("no header line") }
        let header = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        guard header.count == 4, header[0] == Self.format else { throw Unreadable("not a gqlmux handover record") }
        guard header[1] == "\(Self.version)" || header[1] == "\(Self.versionWithLaneCredentials)" else {
            throw Unreadable(
                "handover record version \(header[1]); this gqlmuxd reads versions \(Self.version) and \(Self.versionWithLaneCredentials)"
            )
        }
        let plain = header[1] == "\(Self.version)"
        let body = Array(bytes[(newline + 1)...])
        guard Int(header[2]) == body.count else { throw Unreadable("handover record cut short: \(body.count) of \(header[2]) bytes") }
        guard header[3] == Self.hex(Self.fnv1a64(body)) else { throw Unreadable("handover record damaged: checksum mismatch") }
        let root: JSONValue
        do {
            root = try body.withUnsafeBytes { bytes throws(JSONScanError) in try JSONValue.parse(bytes) }
        } catch {
            throw Unreadable("handover record is not JSON: \(error)")
        }
        guard case .number(let at)? = root["handedAtNs"], let nanoseconds = Int64(at), let list = root["clients"]?.arrayValue else {
            throw Unreadable("handover record lacks handedAtNs or clients")
        }
        // Version 2's lane credentials (version 1 has none).
        var laneCredentials: [Client.Credential] = []
        if !plain {
            guard let table = root["laneCredentials"]?.arrayValue, !table.isEmpty else {
                throw Unreadable("handover record version \(Self.versionWithLaneCredentials) without laneCredentials")
            }
            for credential in table {
                guard case .object = credential else { throw Unreadable("handover record has a lane credential that is not an object") }
                var payload: String?
                if let value = credential["payload"] {
                    guard let text = value.stringValue else { throw Unreadable("handover record has a lane credential whose payload is not text") }
                    payload = text
                }
                laneCredentials.append(Client.Credential(payload: payload, headers: try Self.readHeaders(credential["headers"])))
            }
        }
        var clients: [Client] = []
        for entry in list {
            guard let cookie = entry["cookie"]?.stringValue.flatMap(UInt64.init),
                let origin = entry["origin"]?.stringValue.flatMap(ClientOrigin.init(rawValue:)),
                let kind = entry["kind"]?.stringValue.flatMap(Kind.init(rawValue:)),
                let name = entry["name"]?.stringValue,
                case .number(let acknowledged)? = entry["acknowledged"],
                let subscriptions = entry["subscriptions"]?.arrayValue
            else { throw Unreadable("handover record has a client without cookie, origin, kind, name, acknowledged or subscriptions") }
            var carried: [Subscription] = []
            for subscription in subscriptions {
                guard let id = subscription["id"]?.stringValue, let payload = subscription["payload"]?.stringValue else {
                    throw Unreadable("handover record has a subscription without id or payload")
                }
                var credential: Int?
                if let index = subscription["credential"] {
                    guard case .number(let text) = index, let value = Int(text), value >= 0 else {
                        throw Unreadable("handover record has a subscription whose credential is not an index")
                    }
                    credential = value
                }
                carried.append(
                    Subscription(
                        id: id,
                        payload: payload,
                        snapshot: subscription["snapshot"]?.stringValue,
                        upstream: subscription["upstream"]?.stringValue,
                        credential: credential
                    )
                )
            }
            let headers = try Self.readHeaders(entry["presentedHeaders"])
            guard carried.allSatisfy({ $0.credential.map { $0 < laneCredentials.count } ?? true }) else {
                throw Unreadable("handover record has a subscription naming a credential its client does not have")
            }
            clients.append(
                Client(
                    cookie: cookie,
                    origin: origin,
                    kind: kind,
                    name: name,
                    acknowledged: acknowledged == "1",
                    subscriptions: carried,
                    upstream: entry["upstream"]?.stringValue,
                    presentedPayload: entry["presentedPayload"]?.stringValue,
                    presentedHeaders: headers,
                    connectedAtMs: Self.count(entry["connectedAtMs"]),
                    restarts: Self.count(entry["restarts"])
                )
            )
        }
        self.init(handedAt: Instant(nanoseconds: nanoseconds), clients: clients, laneCredentials: laneCredentials)
    }

    /// A member that counts something (a whole number ≥ 0); nil when absent or not one (the
    /// operator's view does without it).
    private static func count(_ value: JSONValue?) -> Int? {
        guard case .number(let text)? = value, let number = Int(text), number >= 0 else { return nil }
        return number
    }

    private static func readHeaders(_ value: JSONValue?) throws(Unreadable) -> [Client.Header] {
        var headers: [Client.Header] = []
        for header in value?.arrayValue ?? [] {
            guard let name = header["name"]?.stringValue, let value = header["value"]?.stringValue else {
                throw Unreadable("handover record has a presented header without name or value")
            }
            headers.append(Client.Header(name: name, value: value))
        }
        return headers
    }

    static func fnv1a64(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
