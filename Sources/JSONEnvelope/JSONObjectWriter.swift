import NIOCore

/// Writes one JSON object field by field: keys and strings escaped, numbers as numbers,
/// nested values as already-encoded JSON. For small messages the daemon makes (status,
/// connection_ack); the hot path writes its bytes directly.
package struct JSONObjectWriter {
    private var buffer = ByteBuffer()
    private var empty = true

    package init() {
        buffer.writeStaticString("{")
    }

    private mutating func key(_ key: String) {
        if !empty { buffer.writeStaticString(",") }
        empty = false
        buffer.writeJSONString(key)
        buffer.writeStaticString(":")
    }

    package mutating func field(_ name: String, _ value: String) {
        key(name)
        buffer.writeJSONString(value)
    }

    package mutating func field(_ name: String, _ value: String?) {
        key(name)
        if let value { buffer.writeJSONString(value) } else { buffer.writeStaticString("null") }
    }

    package mutating func field(_ name: String, _ value: Int) {
        key(name)
        buffer.writeString(String(value))
    }

    /// A number to `decimals` places (seconds, rates: a thousandth by default), or null for nil
    /// or a value that is not finite.
    package mutating func field(_ name: String, number value: Double?, decimals: Int = 3) {
        key(name)
        guard let value, value.isFinite else {
            buffer.writeStaticString("null")
            return
        }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        buffer.writeString(rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int64(rounded)) : String(rounded))
    }

    /// A whole number, or null for nil.
    package mutating func field(_ name: String, count value: Int?) {
        key(name)
        if let value { buffer.writeString(String(value)) } else { buffer.writeStaticString("null") }
    }

    /// An array of objects, outside any object (an answer whose payload is a list).
    package static func array(_ objects: [(inout JSONObjectWriter) -> Void]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeStaticString("[")
        for (index, write) in objects.enumerated() {
            if index > 0 { buffer.writeStaticString(",") }
            var nested = JSONObjectWriter()
            write(&nested)
            buffer.writeImmutableBuffer(nested.finish())
        }
        buffer.writeStaticString("]")
        return buffer
    }

    /// `value` is complete JSON (an object, array or literal written elsewhere).
    package mutating func field(_ name: String, json value: ByteBuffer) {
        key(name)
        buffer.writeImmutableBuffer(value)
    }

    package mutating func field(_ name: String, object: (inout JSONObjectWriter) -> Void) {
        var nested = JSONObjectWriter()
        object(&nested)
        field(name, json: nested.finish())
    }

    package mutating func field(_ name: String, objects: [(inout JSONObjectWriter) -> Void]) {
        field(name, json: Self.array(objects))
    }

    package mutating func finish() -> ByteBuffer {
        var done = buffer
        done.writeStaticString("}")
        return done
    }
}
