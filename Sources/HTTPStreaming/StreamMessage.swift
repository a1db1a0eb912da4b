import JSONEnvelope
import NIOCore

/// What one multipart part or one SSE event means for its subscription.
package enum StreamMessage: Equatable, Sendable {
    /// A keep-alive (`{}` part); the bytes alone already proved the stream alive.
    case heartbeat
    /// An ExecutionResult, GraphQL errors inside it included: the stream stays open.
    case result(ByteBuffer)
    /// The server ended the operation with these GraphQL errors (an array).
    case fatal(ByteBuffer)
    /// The server completed the operation.
    case completed
    /// Nothing to do (`{"payload":null}` alone, an SSE event of another type).
    case ignored
}

extension StreamMessage {
    /// Reads a multipart part (Apollo subscriptionSpec 1.0): `{}` heartbeat, `{"payload":{…}}`
    /// result, `{"payload":null,"errors":[…]}` fatal, `{"payload":null}` ignored, and a bare
    /// `{"data":…}` or `{"errors":…}` without `payload` (async-graphql) as a result.
    package static func multipart(_ part: ByteBuffer) throws(StreamParseError) -> StreamMessage {
        let members: [JSONMember]
        do {
            members = try part.withUnsafeReadableBytes { bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }
        } catch {
            throw StreamParseError("a multipart part is not a JSON object: \(error)")
        }
        if members.isEmpty { return .heartbeat }
        func slice(_ member: JSONMember) -> ByteBuffer {
            part.getSlice(at: part.readerIndex + member.range.lowerBound, length: member.range.count)!
        }
        let payload = members.first { $0.key == "payload" }
        let errors = members.first { $0.key == "errors" && $0.kind == .array }
        switch payload?.kind {
        case .object?:
            return .result(slice(payload!))
        case .null?:
            return errors.map { .fatal(slice($0)) } ?? .ignored
        case nil:
            if members.contains(where: { $0.key == "data" }) || errors != nil { return .result(part) }
            return .ignored
        default:
            throw StreamParseError("a multipart part's payload is neither an object nor null")
        }
    }

    /// Reads a graphql-sse event (distinct connections mode): `next` carries an
    /// ExecutionResult, `complete` ends the operation; other event types are ignored.
    package static func sse(_ event: SSEEvent) throws(StreamParseError) -> StreamMessage {
        switch event.type {
        case "next":
            do {
                _ = try event.data.withUnsafeReadableBytes { bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }
            } catch {
                throw StreamParseError("an SSE next event is not a JSON object: \(error)")
            }
            return .result(event.data)
        case "complete":
            return .completed
        default:
            return .ignored
        }
    }
}
