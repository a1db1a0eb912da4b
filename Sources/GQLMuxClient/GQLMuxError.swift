import LocalProtocol

/// An error from gqlmux or the upstream, identified by its `code`.
///
/// Compare with the static members: `catch let error as GQLMuxError where error == .forbidden`.
public struct GQLMuxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One of the daemon's codes (`BAD_REQUEST`, `CONNECTION_LOST`, …), an upstream error's
    /// `extensions.code`, or `UPSTREAM_ERROR` when the upstream gave none.
    public let code: String
    public let message: String
    /// For `UPSTREAM_CLOSED`: the WebSocket close code the upstream used.
    public let closeCode: Int?

    public init(code: String, message: String = "", closeCode: Int? = nil) {
        self.code = code
        self.message = message
        self.closeCode = closeCode
    }

    /// This code with a message, for the client's own errors.
    func with(message: String) -> GQLMuxError { GQLMuxError(code: code, message: message, closeCode: closeCode) }

    public var description: String { message.isEmpty ? code : "\(code): \(message)" }

    /// Errors are equal when their codes are.
    public static func == (lhs: GQLMuxError, rhs: GQLMuxError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public static let badRequest = GQLMuxError(code: LocalErrorCode.badRequest)
    public static let invalidDocument = GQLMuxError(code: LocalErrorCode.invalidDocument)
    public static let duplicateID = GQLMuxError(code: LocalErrorCode.duplicateID)
    public static let limitExceeded = GQLMuxError(code: LocalErrorCode.limitExceeded)
    public static let forbidden = GQLMuxError(code: LocalErrorCode.forbidden)
    public static let connectionLost = GQLMuxError(code: LocalErrorCode.connectionLost)
    public static let upstreamClosed = GQLMuxError(code: LocalErrorCode.upstreamClosed)
    public static let slowConsumer = GQLMuxError(code: LocalErrorCode.slowConsumer)
    public static let shuttingDown = GQLMuxError(code: LocalErrorCode.shuttingDown)
    /// The upstream answered with GraphQL errors and no code of its own.
    public static let upstreamError = GQLMuxError(code: "UPSTREAM_ERROR")
    /// The daemon's socket could not be reached (client-side).
    public static let daemonUnavailable = GQLMuxError(code: "DAEMON_UNAVAILABLE")
    /// The client was closed (client-side).
    public static let clientClosed = GQLMuxError(code: "CLIENT_CLOSED")
}
