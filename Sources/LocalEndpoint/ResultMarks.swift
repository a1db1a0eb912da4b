import JSONEnvelope
import NIOCore

/// Marks on a result that gqlmuxd itself produced rather than passed through as it came (a
/// replayed latest result): for the GraphQL endpoint's clients, whose protocols have no field
/// of their own for them, `"gqlmux": {MARK: true}` inside the result's `extensions` (beside the
/// server's own extensions, if any). The line protocol marks its `next` line instead.
package enum ResultMarks {
    /// `payload` (a GraphQL result object) with `extensions.gqlmux.<mark> = true`; a payload
    /// that is not an object is returned as it is.
    package static func marked(_ payload: ByteBuffer, _ mark: String) -> ByteBuffer {
        let parsed = payload.withUnsafeReadableBytes { try? JSONValue.parse($0) }
        guard case .object(var members)? = parsed else { return payload }
        let flag = JSONValue.Member(mark, .bool(true))
        if let index = members.firstIndex(where: { $0.key == "extensions" }), case .object(var extensions) = members[index].value {
            if let own = extensions.firstIndex(where: { $0.key == "gqlmux" }), case .object(var marks) = extensions[own].value {
                marks.append(flag)
                extensions[own] = JSONValue.Member("gqlmux", .object(marks))
            } else {
                extensions.append(JSONValue.Member("gqlmux", .object([flag])))
            }
            members[index] = JSONValue.Member("extensions", .object(extensions))
        } else {
            members.append(JSONValue.Member("extensions", .object([JSONValue.Member("gqlmux", .object([flag]))])))
        }
        return ByteBuffer(string: JSONValue.object(members).text)
    }
}
