import LocalProtocol

/// An error from gqlmux or the upstream, identified by its `code`.
///
/// Compare with the static members: `catch let error as GQLMuxError where error == .forbidden`.
public struct GQLMuxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One of the daemon's codes (`BAD_REQUEST`, `CONNECTION_LOST`, …), an upstream error's
    /// `extensions.code`, or `UPSTREAM_ERROR` when the upstream gave none.
    public let code: String
    /// What went wrong, in words (the daemon's or the server's).
    public let message: String
    /// For `UPSTREAM_CLOSED`: the WebSocket close code the upstream used.
    public let closeCode: Int?
    /// For `LIMIT_EXCEEDED`: the configuration key of the limit hit (`max_operations_per_client`, …).
    public let limit: String?

    /// An error with `code` (one of the contract's codes, or a server's), a message, and for
    /// `UPSTREAM_CLOSED` the WebSocket close code.
    public init(code: String, message: String = "", closeCode: Int? = nil, limit: String? = nil) {
        self.code = code
        self.message = message
        self.closeCode = closeCode
        self.limit = limit
    }

    /// This code with a message, for the client's own errors.
    func with(message: String) -> GQLMuxError { GQLMuxError(code: code, message: message, closeCode: closeCode, limit: limit) }

    /// `CODE: message`.
    public var description: String { message.isEmpty ? code : "\(code): \(message)" }

    /// Errors are equal when their codes are.
    public static func == (lhs: GQLMuxError, rhs: GQLMuxError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// A request line the daemon could not use (`BAD_REQUEST`).
    public static let badRequest = GQLMuxError(code: LocalErrorCode.badRequest.rawValue)
    /// A GraphQL document that does not parse or names no runnable operation (`INVALID_DOCUMENT`).
    public static let invalidDocument = GQLMuxError(code: LocalErrorCode.invalidDocument.rawValue)
    /// An operation id already in use on this connection (`DUPLICATE_ID`).
    public static let duplicateID = GQLMuxError(code: LocalErrorCode.duplicateID.rawValue)
    /// A daemon limit was reached: clients, operations, document size, the upstream pool (`LIMIT_EXCEEDED`).
    public static let limitExceeded = GQLMuxError(code: LocalErrorCode.limitExceeded.rawValue)
    /// This user may not use gqlmuxd, or not this admin verb (`FORBIDDEN`).
    public static let forbidden = GQLMuxError(code: LocalErrorCode.forbidden.rawValue)
    /// The upstream connection was lost with a query or mutation in flight; it was not retried (`CONNECTION_LOST`).
    public static let connectionLost = GQLMuxError(code: LocalErrorCode.connectionLost.rawValue)
    /// The upstream ended the operation with a fatal close or refusal; see ``closeCode`` (`UPSTREAM_CLOSED`).
    public static let upstreamClosed = GQLMuxError(code: LocalErrorCode.upstreamClosed.rawValue)
    /// The daemon cut this client for not reading fast enough (`SLOW_CONSUMER`).
    public static let slowConsumer = GQLMuxError(code: LocalErrorCode.slowConsumer.rawValue)
    /// gqlmuxd is stopping (`SHUTTING_DOWN`); subscriptions reconnect when `reconnect` is on.
    public static let shuttingDown = GQLMuxError(code: LocalErrorCode.shuttingDown.rawValue)
    /// The upstream answered with GraphQL errors and no code of its own.
    public static let upstreamError = GQLMuxError(code: "UPSTREAM_ERROR")
    /// The daemon's socket could not be reached (client-side).
    public static let daemonUnavailable = GQLMuxError(code: "DAEMON_UNAVAILABLE")
    /// The client was closed (client-side).
    public static let clientClosed = GQLMuxError(code: "CLIENT_CLOSED")
}
