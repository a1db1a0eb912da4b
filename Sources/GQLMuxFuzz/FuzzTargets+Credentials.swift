import JSONEnvelope
import LocalEndpoint

extension FuzzTargets {
    /// The endpoint token the credential invariants keep out of what goes upstream.
    static let endpointToken = EndpointToken(fileContents: "fuzz-endpoint-token-0123456789")!

    /// Invariant: whatever a client presents, what may go upstream holds no byte of the
    /// endpoint's token, however it was written (escaped, nested, under any name). Inputs that
    /// say `TOKEN` get the real token there, so the fuzzer reaches it without guessing it.
    static func endpointTokenNeverLeaves(payload: [UInt8], headers: [String]) {
        let payload = withToken(payload)
        switch endpointToken.redacting(payload: payload) {
        case .unchanged: precondition(!holdsToken(payload), "a payload holding the endpoint token was passed on whole")
        case .without(let rest): precondition(!holdsToken(rest), "the endpoint token was left in what goes upstream")
        case .refused: break
        }
        for header in headers.map({ withToken(Array($0.utf8)) }) {
            precondition(endpointToken.occurs(in: header) == contains(header, token), "the token search missed the token in a header")
        }
    }

    private static let token = Array("fuzz-endpoint-token-0123456789".utf8)

    /// Whether `needle`'s bytes occur in `haystack` (a plain search, the oracle).
    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// `bytes` with each `TOKEN` replaced by the token.
    private static func withToken(_ bytes: [UInt8]) -> [UInt8] {
        let marker = Array("TOKEN".utf8)
        guard contains(bytes, marker) else { return bytes }
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if index + marker.count <= bytes.count, bytes[index..<(index + marker.count)].elementsEqual(marker) {
                out += token
                index += marker.count
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// An oracle of its own: the token in the raw bytes, or in any key or string once decoded.
    private static func holdsToken(_ bytes: [UInt8]) -> Bool {
        if contains(bytes, token) { return true }
        guard let value = bytes.withUnsafeBytes({ try? JSONValue.parse($0) }) else { return false }
        func holds(_ value: JSONValue) -> Bool {
            switch value {
            case .string(let text): contains(Array(text.utf8), token)
            case .object(let members): members.contains { contains(Array($0.key.utf8), token) || holds($0.value) }
            case .array(let values): values.contains(where: holds)
            case .number, .bool, .null: false
            }
        }
        return holds(value)
    }
}
