import JSONEnvelope
import NIOCore

/// The endpoint's own error answers: `{"errors":[{"message":…}]}`, as GraphQL over HTTP shapes
/// a request error, and, for a peer whose request never reached the HTTP layer (a stalled
/// head, a full listener), the whole HTTP/1.1 response as bytes that end the connection.
package enum HTTPErrorResponse {
    /// `{"errors":[{"message":MESSAGE}]}`.
    package static func body(_ message: String) -> ByteBuffer {
        var writer = JSONObjectWriter()
        writer.field("message", message)
        var body = ByteBuffer(string: #"{"errors":["#)
        var error = writer.finish()
        body.writeBuffer(&error)
        body.writeString("]}")
        return body
    }

    /// A whole response with `Connection: close`, to write below the HTTP encoder.
    /// - Parameter headers: extra header lines (for example `Retry-After`).
    package static func raw(status: Int, reason: String, message: String, headers: [(String, String)] = []) -> ByteBuffer {
        var body = body(message)
        var out = ByteBuffer(string: "HTTP/1.1 \(status) \(reason)\r\nContent-Type: application/json; charset=utf-8\r\n")
        out.writeString("Content-Length: \(body.readableBytes)\r\n")
        for (name, value) in headers { out.writeString("\(name): \(value)\r\n") }
        out.writeString("Connection: close\r\n\r\n")
        out.writeBuffer(&body)
        return out
    }
}
