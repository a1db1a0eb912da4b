import GQLMuxVocabulary

/// Which subprotocols the next WebSocket upgrade offers. `[upstream] protocol = "auto"` offers
/// both, modern first, and a server picks one. Some servers pick wrongly: a
/// subscriptions-transport-ws 0.11 `SubscriptionServer` behind the `ws` library accepts the
/// upgrade under the first protocol offered (`graphql-transport-ws`), then sees that it does
/// not speak it and closes with 1002 before any message. Offering the same list again can never
/// succeed, so such a refusal drops that protocol from the offer until the configuration changes.
///
/// States: `offering(all)` → (1002 before the ack on a protocol that is not the last one left)
/// → `offering(rest)`; a new configuration starts again from `offering(all)`.
package struct ProtocolOffer: Sendable, Equatable {
    /// The offer as configured, in order of preference.
    package private(set) var configured: [WireProtocol]
    /// Protocols a server refused by closing 1002 before its ack.
    package private(set) var refused: [WireProtocol] = []

    package init(_ configured: [WireProtocol]) {
        self.configured = configured
    }

    /// What the next upgrade offers: the configured list less the refused protocols.
    package var current: [WireProtocol] { configured.filter { !refused.contains($0) } }

    /// A connection that spoke `wire` closed with `code` before the server acknowledged it.
    /// - Returns: the protocol the next upgrade falls back to, when this refusal changed the
    ///   offer; nil when it did not (another close code, or nothing else left to offer).
    package mutating func closedBeforeAck(wire: WireProtocol, code: CloseCode?) -> WireProtocol? {
        guard code == .protocolError, current.count > 1, current.contains(wire) else { return nil }
        refused.append(wire)
        return current.first
    }

    /// A reloaded configuration: a changed offer starts again from the whole list.
    package mutating func configure(_ protocols: [WireProtocol]) {
        guard protocols != configured else { return }
        self = ProtocolOffer(protocols)
    }
}
