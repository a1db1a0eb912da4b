import GQLMuxConfiguration
import GQLMuxVocabulary
import LocalProtocol
import NIOCore
import RequestValidation
import SystemdSupport

/// The control plane as a session sees it: its admin verbs, the answers to `status` and
/// `metrics`, the document limits in force, and being counted in and out. Sessions are given
/// this and the data plane (``Switchboard``, ``DaemonEvents``, ``DaemonMetrics``); they never see
/// the ``Daemon`` itself. Every requirement is called on the daemon's loop.
protocol SessionHost: AnyObject {
    /// `[limits] max_document_tokens` and `max_document_depth` as of now (a reload may change them).
    var documentLimits: SubscribeRequest.Limits { get }
    /// The `connection_ack` line (the daemon's version, limits and upstream state).
    func connectionAck() -> SessionMessage
    /// The `status` verb's payload.
    /// - Parameter wholeURLs: upstream URLs with their query strings and user info (for an
    ///   admin); without them otherwise.
    func statusPayload(wholeURLs: Bool) -> ByteBuffer
    /// The `metrics` verb's text (the Prometheus exposition).
    func metricsText() -> [UInt8]
    /// Whether `peer` may use the admin verbs.
    func isAdmin(_ peer: PeerCredentials?) -> Bool
    /// Pauses upstream `upstream` (nil: every one); the refusal when there is none by that name.
    func pause(upstream: String?) -> LaneRefusal?
    func resume(upstream: String?) -> LaneRefusal?
    /// Reloads the configuration; fails, keeping the running one, when the new file is refused.
    func reload() -> EventLoopFuture<Void>
    /// Restarts online (systemd's file descriptor store): nil when begun, else why it cannot.
    func restart() -> String?
    func sessionOpened(_ session: ClientSession)
    func sessionClosed(_ session: ClientSession)
    /// The lane of upstream `upstream` (nil: `default`) for `session`'s operations, or why it
    /// may not use that upstream.
    func lane(upstream: String?, for session: ClientSession) -> Result<LaneID, LaneRefusal>
    /// Something a status line shows has changed (an operation was added or removed).
    func statusChanged()
    /// `[limits] max_credential_bytes` while some upstream has `identity = "client"`; nil when
    /// none has (a presented credential is then not kept at all).
    var credentialLimit: Int? { get }
    /// A client no longer uses identity lane `lane`.
    func releaseLane(_ lane: LaneID)
    /// The answer to `clients` or `operations`: every row for an admin, else those of `peer`'s
    /// uid (none for a peer without credentials that is not an admin).
    func table(_ table: ClientRequest.Table, for peer: PeerCredentials?) -> ByteBuffer
    /// `session` is being cut for falling behind (counted for its uid and process).
    func slowConsumerCut(_ session: ClientSession)
}

extension Daemon: SessionHost {
    package var documentLimits: SubscribeRequest.Limits { configuration.limits.document }

    var credentialLimit: Int? {
        configuration.upstreams.contains { if case .client = $0.identity { true } else { false } } ? configuration.limits.maxCredentialBytes : nil
    }

    /// A session for `channel`, wired to this daemon's data plane and to it as the host.
    func makeSession(_ channel: any Channel, arrival: ClientSession.Arrival) -> ClientSession {
        ClientSession(host: self, switchboard: switchboard, events: events, metrics: metrics, channel: channel, arrival: arrival)
    }
}
