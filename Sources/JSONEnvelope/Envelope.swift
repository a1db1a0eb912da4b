import NIOCore

/// The envelope of a graphql-transport-ws style message (also the local protocol's):
/// `type`, `id`, `state`, and the `payload` left undecoded as a slice of the message.
package struct Envelope: Sendable {
    package var type: String
    package var id: String?
    /// The `state` of a local-protocol `state` message.
    package var state: String?
    /// The raw `payload` value, sharing the message's storage (never copied or decoded).
    package var payload: ByteBuffer?
    package var payloadKind: JSONValueKind?
    /// A local-protocol `active` after an outage: how long the stream was down.
    package var gapMs: Int?
    /// A local-protocol `next` that replays a shared subscription's latest result.
    package var replayed = false
    /// A local-protocol `next` that answers the subscription's `resnapshot` query.
    package var snapshot = false

    /// Scans a whole message; `type` must be a string, `id` a string when present.
    package init(_ message: ByteBuffer) throws(JSONScanError) {
        var type: String?
        var id: String?
        var state: String?
        var payload: JSONMember?
        var gapMs: Int?
        var replayed = false
        var snapshot = false
        try message.withUnsafeReadableBytes { bytes throws(JSONScanError) in
            for member in try JSONScanner.scanObject(bytes) {
                switch member.key {
                case "type":
                    guard member.kind == .string else {
                        throw JSONScanError(offset: member.range.lowerBound, reason: "'type' must be a string")
                    }
                    type = JSONScanner.decodeString(bytes, member.range)
                case "id":
                    guard member.kind == .string else {
                        throw JSONScanError(offset: member.range.lowerBound, reason: "'id' must be a string")
                    }
                    id = JSONScanner.decodeString(bytes, member.range)
                case "state" where member.kind == .string:
                    state = JSONScanner.decodeString(bytes, member.range)
                case "payload":
                    payload = member
                case "gapMs" where member.kind == .number:
                    gapMs = Int(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[member.range]), as: UTF8.self))
                case "replayed" where member.kind == .bool:
                    replayed = bytes[member.range.lowerBound] == UInt8(ascii: "t")
                case "snapshot" where member.kind == .bool:
                    snapshot = bytes[member.range.lowerBound] == UInt8(ascii: "t")
                default:
                    continue
                }
            }
        }
        guard let type else { throw JSONScanError(offset: 0, reason: "missing 'type'") }
        self.type = type
        self.id = id
        self.state = state
        self.payload = payload.map { message.getSlice(at: message.readerIndex + $0.range.lowerBound, length: $0.range.count)! }
        self.payloadKind = payload?.kind
        self.gapMs = gapMs
        self.replayed = replayed
        self.snapshot = snapshot
    }
}
