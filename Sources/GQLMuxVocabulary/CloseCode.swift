/// A WebSocket close code, as RFC 6455 and the two GraphQL WebSocket protocols give them
/// meaning. Every code gqlmux decides on has a case; any other code a server sends is kept as
/// `.other`. An integer literal makes the code of that number (`4403` is `.forbidden`).
package enum CloseCode: Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// 1000: a normal close (ours when pausing, reconnecting or shutting down).
    case normal
    /// 1001: the peer is going away (a server restart).
    case goingAway
    /// 1002: a WebSocket protocol error.
    case protocolError
    /// 1005: a close frame without a code (never sent).
    case noStatus
    /// 1007: the message was not valid (not UTF-8, not what the protocol allows).
    case invalidPayload
    /// 1008: a policy violation (the local endpoint: a client too slow to read).
    case policyViolation
    /// 1009: a message too big.
    case messageTooBig
    /// 1011: an internal error of the server.
    case internalError
    /// 1012: the service restarts.
    case serviceRestart
    /// 1013: try again later.
    case tryAgainLater
    /// 1014: a bad gateway.
    case badGateway
    /// 4400: a malformed message (graphql-transport-ws).
    case badRequest
    /// 4401: unauthorized (subscribe before the ack, or bad credentials).
    case unauthorized
    /// 4403: forbidden.
    case forbidden
    /// 4406: subprotocol not acceptable.
    case subprotocolNotAcceptable
    /// 4408: no `connection_init` (or no ack) in time.
    case initTimeout
    /// 4409: a subscriber for this id already exists.
    case subscriberAlreadyExists
    /// 4429: too many initialisation requests.
    case tooManyInitRequests
    /// Any other code.
    case other(UInt16)

    package init(_ code: UInt16) {
        switch code {
        case 1000: self = .normal
        case 1001: self = .goingAway
        case 1002: self = .protocolError
        case 1005: self = .noStatus
        case 1007: self = .invalidPayload
        case 1008: self = .policyViolation
        case 1009: self = .messageTooBig
        case 1011: self = .internalError
        case 1012: self = .serviceRestart
        case 1013: self = .tryAgainLater
        case 1014: self = .badGateway
        case 4400: self = .badRequest
        case 4401: self = .unauthorized
        case 4403: self = .forbidden
        case 4406: self = .subprotocolNotAcceptable
        case 4408: self = .initTimeout
        case 4409: self = .subscriberAlreadyExists
        case 4429: self = .tooManyInitRequests
        default: self = .other(code)
        }
    }

    package init(integerLiteral value: UInt16) { self.init(value) }

    /// The number on the wire.
    package var code: UInt16 {
        switch self {
        case .normal: 1000
        case .goingAway: 1001
        case .protocolError: 1002
        case .noStatus: 1005
        case .invalidPayload: 1007
        case .policyViolation: 1008
        case .messageTooBig: 1009
        case .internalError: 1011
        case .serviceRestart: 1012
        case .tryAgainLater: 1013
        case .badGateway: 1014
        case .badRequest: 4400
        case .unauthorized: 4401
        case .forbidden: 4403
        case .subprotocolNotAcceptable: 4406
        case .initTimeout: 4408
        case .subscriberAlreadyExists: 4409
        case .tooManyInitRequests: 4429
        case .other(let code): code
        }
    }

    package var description: String { String(code) }

    /// 4401, 4403, 4406: the credentials or the setup are wrong, so retrying cannot help until
    /// someone changes them; the transport waits for a reload, resume or new subscribe.
    package var isFatal: Bool {
        switch self {
        case .unauthorized, .forbidden, .subprotocolNotAcceptable: true
        default: false
        }
    }

    /// 4400, 1007, 1009, 4409: "you sent something I cannot accept", the only closes that are
    /// evidence against an operation (see `TransportStateMachine+Quarantine.swift`).
    package var blamesClient: Bool {
        switch self {
        case .badRequest, .invalidPayload, .messageTooBig, .subscriberAlreadyExists: true
        default: false
        }
    }
}

extension CloseCode {
    /// A case and its number are one value: `.other(4403)` (made by hand) equals `.forbidden`.
    package static func == (a: CloseCode, b: CloseCode) -> Bool { a.code == b.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
