import JSONEnvelope
import NIOCore

/// Marks on a result that gqlmuxd itself gives rather than passes through as it came (a
/// replayed latest result, a snapshot): for the GraphQL endpoint's clients, whose protocols have
/// no field of their own for them, `"gqlmux": {MARK: true}` inside the result's `extensions`
/// (beside the server's own extensions, if any). The line protocol marks its `next` line instead.
package enum ResultMarks {
    /// `payload` (a GraphQL result object) with `extensions.gqlmux.<mark> = true`; a payload
    /// that is not an object is returned as it is. Only the top level and `extensions` are
    /// scanned; every value is copied as the server's bytes, never decoded and encoded again.
    /// - Parameter mark: one of gqlmuxd's own names (`replayed`, `snapshot`): written as is.
    package static func marked(_ payload: ByteBuffer, _ mark: StaticString) -> ByteBuffer {
        payload.withUnsafeReadableBytes { bytes in
            guard let members = try? JSONScanner.scanObject(bytes) else { return payload }
            var out = ByteBuffer()
            out.reserveCapacity(bytes.count + 48)
            var marked = false
            writeObject(members, of: bytes, to: &out) { name, value, out in
                guard !marked, name == "extensions", let inner = try? JSONScanner.scanObject(value) else { return false }
                marked = true
                writeExtensions(inner, of: value, mark: mark, to: &out)
                return true
            }
            if !marked {
                out.moveWriterIndex(to: out.writerIndex - 1)  // reopen the object
                out.writeStaticString(members.isEmpty ? "" : ",")
                out.writeStaticString(#""extensions":{"gqlmux":{""#)
                out.writeStaticString(mark)
                out.writeStaticString(#"":true}}}"#)
            }
            return out
        }
    }

    /// The server's `extensions` object with gqlmuxd's mark in its `gqlmux` member (made if
    /// missing).
    private static func writeExtensions(_ members: [JSONMember], of bytes: UnsafeRawBufferPointer, mark: StaticString, to out: inout ByteBuffer) {
        var found = false
        writeObject(members, of: bytes, to: &out) { name, value, out in
            guard !found, name == "gqlmux", let own = try? JSONScanner.scanObject(value) else { return false }
            found = true
            writeObject(own, of: value, to: &out) { _, _, _ in false }
            appendFlag(mark, to: &out, after: !own.isEmpty)
            return true
        }
        guard !found else { return }
        out.moveWriterIndex(to: out.writerIndex - 1)
        out.writeStaticString(members.isEmpty ? "" : ",")
        out.writeStaticString(#""gqlmux":{}"#)
        appendFlag(mark, to: &out, after: false)
        out.writeStaticString("}")
    }

    /// Turns the `}` just written into `,"<mark>":true}` (or `"<mark>":true}` in an empty object).
    private static func appendFlag(_ mark: StaticString, to out: inout ByteBuffer, after others: Bool) {
        out.moveWriterIndex(to: out.writerIndex - 1)
        out.writeStaticString(others ? ",\"" : "\"")
        out.writeStaticString(mark)
        out.writeStaticString("\":true}")
    }

    /// `{members}`, each value's bytes as they were, unless `replace` writes the value itself
    /// (it gets the member's name and value bytes, and returns whether it wrote).
    private static func writeObject(
        _ members: [JSONMember],
        of bytes: UnsafeRawBufferPointer,
        to out: inout ByteBuffer,
        replace: (String, UnsafeRawBufferPointer, inout ByteBuffer) -> Bool
    ) {
        out.writeStaticString("{")
        for (index, member) in members.enumerated() {
            if index > 0 { out.writeStaticString(",") }
            out.writeJSONString(member.key)
            out.writeStaticString(":")
            let value = UnsafeRawBufferPointer(rebasing: bytes[member.range])
            if !replace(member.key, value, &out) { out.writeBytes(value) }
        }
        out.writeStaticString("}")
    }
}
