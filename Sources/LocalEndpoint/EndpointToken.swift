import GQLMuxVocabulary
import HTTPFields
import JSONEnvelope
import NIOCore

/// The secret that clients of the endpoint's TCP port must present when
/// `[graphql_endpoint] token_file` is set: `Authorization: Bearer TOKEN` on an HTTP request or
/// on the WebSocket upgrade, or, for WebSocket clients that cannot set headers (browsers), in
/// the `connection_init` payload as `"token": "TOKEN"` or `"authorization": "Bearer TOKEN"`.
///
/// Comparisons take a time that depends on the presented text only, never on how much of it
/// matches.
package struct EndpointToken: Sendable, Equatable {
    private let secret: [UInt8]
    /// The token's bytes (for its redaction from what goes upstream).
    var bytes: [UInt8] { secret }

    /// The fewest bytes a token may have.
    package static let minimumLength = 16

    /// - Parameter fileContents: the token file; surrounding whitespace (a final newline) is ignored.
    package init?(fileContents: String) {
        let token = fileContents.trimming(" \t\r\n")
        guard token.utf8.count >= Self.minimumLength, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        secret = Array(token.utf8)
    }

    /// Whether the presented token is this one.
    package func matches<Bytes: Collection<UInt8>>(_ presented: Bytes) -> Bool {
        var difference = UInt8(presented.count == secret.count ? 0 : 1)
        var index = 0
        for byte in presented {
            difference |= byte ^ secret[index % secret.count]
            index += 1
        }
        return difference == 0
    }

    /// What the request's `Authorization` headers say.
    package enum Presented: Sendable, Equatable {
        /// No `Authorization` header.
        case none
        case valid
        /// A header that is not `Bearer` with this token (or more than one header).
        case invalid
    }

    /// Checks the `Authorization` header values of a request.
    package func check(authorization values: [String]) -> Presented {
        guard !values.isEmpty else { return .none }
        guard values.count == 1, let token = Self.bearer(values[0]) else { return .invalid }
        return matches(token.utf8) ? .valid : .invalid
    }

    /// Whether a `connection_init` payload (a JSON object) carries this token.
    package func accepts(initPayload payload: ByteBuffer?) -> Bool {
        guard let payload, let value = payload.withUnsafeReadableBytes({ try? JSONValue.parse($0) }) else { return false }
        if let token = value["token"]?.stringValue { return matches(token.utf8) }
        if let header = (value["authorization"] ?? value["Authorization"])?.stringValue, let token = Self.bearer(header) {
            return matches(token.utf8)
        }
        return false
    }

    /// The token of `Bearer TOKEN` (the scheme in any case).
    static func bearer(_ header: String) -> Substring? {
        let text = Substring(header.trimming(" \t\r\n"))
        guard text.count > 7, text.prefix(7).lowercased() == "bearer " else { return nil }
        return text.dropFirst(7).drop { $0 == " " }
    }
}
