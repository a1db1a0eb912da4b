import JSONEnvelope
import LocalProtocol
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A client of gqlmuxd over its Unix socket (local protocol v1).
///
/// ```swift
/// let client = GQLMuxClient()
/// for try await result in client.subscribe(query: "subscription { tick }") {
///     print(result.json)
/// }
/// ```
/// After the daemon restarts the client reconnects and re-subscribes on its own; queries and
/// mutations in flight fail with ``GQLMuxError/connectionLost``.
///
/// `@unchecked Sendable` — safe because its mutable state is confined to its own event loop:
/// the public methods hop there (`eventLoop.execute`/`submit`), channel callbacks run there, and
/// every on-loop method (`GQLMuxClient+Connection.swift`) asserts it.
public final class GQLMuxClient: @unchecked Sendable {
    /// How a client finds gqlmuxd, names itself, reconnects and buffers results.
    public struct Configuration: Sendable {
        /// `GQLMUX_SOCKET` when set, else `/run/gqlmux/gqlmux.sock`.
        public var socketPath: String
        /// Sent in `connection_init`; the daemon logs it.
        public var clientName: String
        /// Reconnect to a restarted daemon and re-subscribe (after a first successful connect).
        public var reconnect: Bool
        /// The first wait before reconnecting to a restarted daemon; it doubles each attempt.
        public var reconnectDelay: Duration
        /// The longest wait between reconnect attempts.
        public var maxReconnectDelay: Duration
        /// Results one subscription may hold un-iterated. When one is full the client stops
        /// reading from gqlmuxd until it drains to half (see ``GQLMuxSubscription``); lines
        /// already read (at most two socket reads, 128 KiB) are still delivered.
        public var bufferedResults: Int
        /// This app's own connecting payload (a JSON object as text), sent upstream in its name
        /// by the upstreams configured with `identity = "client"`; nil: none.
        public var upstreamPayloadJSON: String?
        /// This app's own request headers for those upstreams (those named in their
        /// `forward_headers` go upstream).
        public var upstreamHeaders: [String: String]

        /// - Parameters:
        ///   - socketPath: the daemon's socket; nil reads `GQLMUX_SOCKET`, else uses
        ///     `/run/gqlmux/gqlmux.sock`.
        ///   - clientName: sent in `connection_init` and shown in gqlmuxd's journal.
        ///   - reconnect: reconnect and re-subscribe after the daemon restarts.
        ///   - reconnectDelay: the first reconnect wait (doubling).
        ///   - maxReconnectDelay: the cap on the reconnect wait.
        ///   - bufferedResults: results one subscription may hold un-iterated (at least 1).
        ///   - upstreamPayloadJSON: this app's connecting payload for `identity = "client"` upstreams.
        ///   - upstreamHeaders: this app's request headers for those upstreams.
        public init(
            socketPath: String? = nil,
            clientName: String = ProcessInfo.processInfo.processName,
            reconnect: Bool = true,
            reconnectDelay: Duration = .milliseconds(100),
            maxReconnectDelay: Duration = .seconds(2),
            bufferedResults: Int = 1_024,
            upstreamPayloadJSON: String? = nil,
            upstreamHeaders: [String: String] = [:]
        ) {
            self.socketPath = socketPath ?? ProcessInfo.processInfo.environment["GQLMUX_SOCKET"] ?? LocalProtocol.defaultSocketPath
            self.clientName = clientName
            self.reconnect = reconnect
            self.reconnectDelay = reconnectDelay
            self.maxReconnectDelay = maxReconnectDelay
            self.bufferedResults = max(1, bufferedResults)
            self.upstreamPayloadJSON = upstreamPayloadJSON
            self.upstreamHeaders = upstreamHeaders
        }
    }

    /// The settings this client was made with.
    public let configuration: Configuration
    let eventLoop: any EventLoop
    // Loop-confined state.
    var channel: (any Channel)?
    var connecting = false
    var everConnected = false
    var closed = false
    var reconnectAttempt = 0
    var operations: [String: ClientOperation] = [:]
    var nextID = 0
    /// Subscriptions whose buffer is full: while any is, the socket is not read.
    var fullOperations: Set<String> = []
    /// Subscriptions that were full at some time on the current connection: if the daemon
    /// drops it without a word, they are the slow consumers it cut.
    var pressuredOnConnection: Set<String> = []

    /// Makes a client; it connects on its first request and shares that connection among all
    /// its operations.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.eventLoop = MultiThreadedEventLoopGroup.singleton.next()
    }

    /// Subscribes with a ready `payload` object (`{"query":…,"variables":…}`) as JSON text.
    /// - Parameters:
    ///   - onStateChange: each lifecycle state (pending, active, reconnecting, paused).
    ///   - onGap: when the shared stream resumes after an outage, how long it was down (told
    ///     just before its `active`; also ``GQLMuxSubscription/lastGap``).
    ///   - upstream: the upstream it is for, by name (nil: `default`).
    public func subscribe(
        requestJSON: String,
        upstream: String? = nil,
        onStateChange: (@Sendable (GQLMuxSubscriptionState) -> Void)? = nil,
        onGap: (@Sendable (Duration) -> Void)? = nil
    ) -> GQLMuxSubscription {
        let stateBox = NIOLockedValueBox(GQLMuxSubscriptionState.pending)
        let gapBox = NIOLockedValueBox<Duration?>(nil)
        let idBox = NIOLockedValueBox<String?>(nil)
        let buffer = ResultBuffer(capacity: configuration.bufferedResults) { full in
            let apply: @Sendable () -> Void = {
                guard let id = idBox.withLockedValue({ $0 }) else { return }
                self.pressure(full, on: id)
            }
            // Full is told from the loop while it reads: stop reading before the next read.
            if self.eventLoop.inEventLoop { apply() } else { self.eventLoop.execute(apply) }
        }
        let operation = ClientOperation(
            kind: .subscription,
            payload: requestJSON,
            upstream: upstream,
            onNext: { buffer.push($0) },
            onState: { state, gap in
                stateBox.withLockedValue { $0 = state }
                if let gap {
                    gapBox.withLockedValue { $0 = gap }
                    onGap?(gap)
                }
                onStateChange?(state)
            },
            onFinish: { error in
                stateBox.withLockedValue { $0 = .finished }
                buffer.finish(error)
            }
        )
        eventLoop.execute { idBox.withLockedValue { $0 = self.start(operation) } }
        let cancel: @Sendable () -> Void = {
            self.eventLoop.execute {
                guard let id = idBox.withLockedValue({ $0 }) else { return }
                self.cancel(id: id)
            }
        }
        return GQLMuxSubscription(buffer: buffer, stateBox: stateBox, gapBox: gapBox, onCancel: cancel)
    }

    /// Runs a query or mutation given as a ready `payload` object in JSON, on upstream
    /// `upstream` (nil: `default`).
    public func single(requestJSON: String, upstream: String? = nil) async throws -> GQLMuxResult {
        let idBox = NIOLockedValueBox<String?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<GQLMuxResult, any Error>) in
                let resultBox = NIOLockedValueBox<GQLMuxResult?>(nil)
                let operation = ClientOperation(
                    kind: .single,
                    payload: requestJSON,
                    upstream: upstream,
                    onNext: { result in resultBox.withLockedValue { $0 = $0 ?? result } },
                    onState: { _, _ in },
                    onFinish: { error in
                        if let error { return continuation.resume(throwing: error) }
                        guard let result = resultBox.withLockedValue({ $0 }) else {
                            return continuation.resume(throwing: GQLMuxError.upstreamError.with(message: "completed without a result"))
                        }
                        continuation.resume(returning: result)
                    }
                )
                eventLoop.execute { idBox.withLockedValue { $0 = self.start(operation) } }
            }
        } onCancel: {
            eventLoop.execute { if let id = idBox.withLockedValue({ $0 }) { self.cancel(id: id) } }
        }
    }

    /// The daemon's `status` payload as JSON text.
    public func status() async throws -> String { try await admin(.status) }

    /// One JSON object per client connection (the `clients` verb): an admin gets every one,
    /// another peer those of its own uid. The members are described in docs/protocol.md.
    public func clients() async throws -> String { try await admin(.clients) }

    /// One JSON object per upstream operation (the `operations` verb), as ``clients()`` filters.
    public func operations() async throws -> String { try await admin(.operations) }

    /// The daemon's metrics in the Prometheus text exposition format (the `metrics` verb;
    /// the same text `[metrics] listen` serves at `GET /metrics`).
    public func metrics() async throws -> String {
        let payload = try await admin(.metrics)
        guard let text = JSONValue.parse(payload)?.stringValue else {
            throw GQLMuxError(code: LocalErrorCode.badRequest.rawValue, message: "the daemon's metrics answer is not a JSON string")
        }
        return text
    }

    /// Admin verbs (root, the daemon's user, or `[security] admin_uids/admin_gids`).
    /// `upstream`: only that upstream, by name (nil: every one).
    public func pause(upstream: String? = nil) async throws { _ = try await admin(.pause, upstream: upstream) }
    /// Reconnects the upstream after `pause` or a failure (admin); `upstream`: only that one.
    public func resume(upstream: String? = nil) async throws { _ = try await admin(.resume, upstream: upstream) }
    /// Makes gqlmuxd re-read its configuration and credentials (admin); throws the daemon's
    /// error when the new file is refused (the running configuration is kept).
    public func reload() async throws { _ = try await admin(.reload) }
    /// Restarts gqlmuxd without closing a client (admin; under systemd with its file
    /// descriptor store, as gqlmuxd.service sets up): the next process adopts every connection.
    /// Throws the daemon's error where it cannot.
    public func restart() async throws { _ = try await admin(.restart) }

    /// Closes the connection; open operations end with ``GQLMuxError/clientClosed``.
    public func close() async {
        try? await eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.closed = true
            let ops = self.operations
            self.operations.removeAll()
            for op in ops.values { op.onFinish(GQLMuxError.clientClosed) }
            return self.channel?.close() ?? self.eventLoop.makeSucceededVoidFuture()
        }.get()
    }

    private func admin(_ verb: LocalMessageType, upstream: String? = nil) async throws -> String {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            let operation = ClientOperation(
                kind: .admin(verb),
                payload: "",
                upstream: upstream,
                onNext: { continuation.resume(returning: $0.json) },
                onState: { _, _ in },
                onFinish: { error in if let error { continuation.resume(throwing: error) } }
            )
            eventLoop.execute { _ = self.start(operation) }
        }
    }

    package func failedSubscription(_ error: any Error) -> GQLMuxSubscription {
        let buffer = ResultBuffer(capacity: 1) { _ in }
        buffer.finish(error)
        return GQLMuxSubscription(buffer: buffer, stateBox: NIOLockedValueBox(.finished), gapBox: NIOLockedValueBox(nil), onCancel: {})
    }

    /// The `subscribe` payload object; `variablesJSON` must already be a JSON object.
    /// - Parameters:
    ///   - replayLast: `extensions.gqlmux.replayLast` (nil: the daemon's default).
    ///   - resnapshot: `extensions.gqlmux.resnapshot`, a query to run at each resume.
    package static func requestJSON(
        query: String,
        variablesJSON: String?,
        operationName: String?,
        replayLast: Bool? = nil,
        resnapshot: String? = nil
    ) -> String {
        var request = #"{"query":\#(jsonString(query))"#
        if let variablesJSON { request += #","variables":"# + variablesJSON }
        if let operationName { request += #","operationName":\#(jsonString(operationName))"# }
        var options: [String] = []
        if let replayLast { options.append(#""replayLast":\#(replayLast)"#) }
        if let resnapshot { options.append(#""resnapshot":\#(jsonString(resnapshot))"#) }
        if !options.isEmpty { request += #","extensions":{"gqlmux":{"# + options.joined(separator: ",") + "}}" }
        return request + "}"
    }
}
