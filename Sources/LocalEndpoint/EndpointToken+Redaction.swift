import JSONEnvelope

/// Keeping the endpoint's token out of what goes upstream. An app may present the token in its
/// upgrade's `Authorization`, in `connection_init` (`token`, `authorization`, in any case) or on
/// an HTTP request; an upstream with `identity = "client"` forwards what an app presents, so
/// every presented credential passes here first.
extension EndpointToken {
    /// Whether this token's bytes occur anywhere in `text`. The time taken depends on the
    /// lengths of `text` and the token only, never on how much of it matches where.
    package func occurs<Bytes: Collection<UInt8>>(in text: Bytes) -> Bool {
        let text = Array(text)
        let secret = self.bytes
        guard text.count >= secret.count else { return false }
        var found: UInt8 = 0
        for start in 0...(text.count - secret.count) {
            var difference: UInt8 = 0
            for offset in 0..<secret.count { difference |= text[start + offset] ^ secret[offset] }
            found |= difference == 0 ? 1 : 0
        }
        return found != 0
    }

    /// What becomes of a presented `connection_init` payload.
    package enum Redacted: Equatable, Sendable {
        /// It never carried the token: the same bytes.
        case unchanged
        /// The members that carried it (a string holding it, under any name) are left out.
        case without([UInt8])
        /// The token is inside another value (nested, or part of a longer text): nothing of
        /// this payload may go upstream.
        case refused(member: String)
    }

    /// `payload` (a JSON object) with every top-level member whose value carries this token
    /// left out, or refused when the token is elsewhere in it. Escaped text is read decoded.
    package func redacting(payload: [UInt8]) -> Redacted {
        guard let value = payload.withUnsafeBytes({ try? JSONValue.parse($0) }), case .object(let members) = value else {
            return occurs(in: payload) ? .refused(member: "") : .unchanged
        }
        var kept: [JSONValue.Member] = []
        for member in members {
            if let text = member.value.stringValue, occurs(in: Array(text.utf8)) {
                continue  // `"token": T`, `"Authorization": "Bearer T"`, or any other name
            }
            if carries(member.value) || occurs(in: Array(member.key.utf8)) { return .refused(member: member.key) }
            kept.append(member)
        }
        guard kept.count != members.count else { return .unchanged }
        return .without(Array(JSONValue.object(kept).text.utf8))
    }

    /// Whether the token occurs in any key or string inside `value`.
    private func carries(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): occurs(in: Array(text.utf8))
        case .object(let members): members.contains { occurs(in: Array($0.key.utf8)) || carries($0.value) }
        case .array(let values): values.contains { carries($0) }
        case .number, .bool, .null: false
        }
    }
}
