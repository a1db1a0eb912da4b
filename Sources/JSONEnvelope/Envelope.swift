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
    /// A local `subscribe`'s top-level `upstream`: the name of the upstream it is for.
    package var upstream: String?
    /// `upstream` was there but not a string.
    package var upstreamMistyped = false

    /// Scans a whole message; `type` must be a string, `id` a string when present. Nothing is
    /// allocated for the members: keys are compared as bytes and only `type`, `id` and `state`
    /// become strings (a result's envelope cost 470 ns with an array of decoded members).
    package init(_ message: ByteBuffer) throws(JSONScanError) {
        var type: String?
        var id: String?
        var state: String?
        var payload: (range: Range<Int>, kind: JSONValueKind)?
        var gapMs: Int?
        var replayed = false
        var snapshot = false
        var upstream: String?
        var upstreamMistyped = false
        // A mistyped member is told only once the whole text is known to be JSON, so an invalid
        // text always gets the JSON error, as it did when members were checked after the scan.
        var mistyped: JSONScanError?
        try message.withUnsafeReadableBytes { bytes throws(JSONScanError) in
            try JSONScanner.visitObject(bytes) { key, kind, value in
                if JSONScanner.key(key, in: bytes, is: "type") {
                    guard kind == .string else {
                        if mistyped == nil { mistyped = JSONScanError(offset: value.lowerBound, reason: "'type' must be a string") }
                        return
                    }
                    type = JSONScanner.decodeString(bytes, value)
                } else if JSONScanner.key(key, in: bytes, is: "id") {
                    guard kind == .string else {
                        if mistyped == nil { mistyped = JSONScanError(offset: value.lowerBound, reason: "'id' must be a string") }
                        return
                    }
                    id = JSONScanner.decodeString(bytes, value)
                } else if JSONScanner.key(key, in: bytes, is: "payload") {
                    payload = (value, kind)
                } else if kind == .string, JSONScanner.key(key, in: bytes, is: "state") {
                    state = JSONScanner.decodeString(bytes, value)
                } else if kind == .number, JSONScanner.key(key, in: bytes, is: "gapMs") {
                    gapMs = Int(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[value]), as: UTF8.self))
                } else if kind == .bool, JSONScanner.key(key, in: bytes, is: "replayed") {
                    replayed = bytes[value.lowerBound] == UInt8(ascii: "t")
                } else if kind == .bool, JSONScanner.key(key, in: bytes, is: "snapshot") {
                    snapshot = bytes[value.lowerBound] == UInt8(ascii: "t")
                } else if JSONScanner.key(key, in: bytes, is: "upstream") {
                    if kind == .string { upstream = JSONScanner.decodeString(bytes, value) } else { upstreamMistyped = true }
                }
            }
        }
        if let mistyped { throw mistyped }
        guard let type else { throw JSONScanError(offset: 0, reason: "missing 'type'") }
        self.type = type
        self.id = id
        self.state = state
        self.payload = payload.map { message.getSlice(at: message.readerIndex + $0.range.lowerBound, length: $0.range.count)! }
        self.payloadKind = payload?.kind
        self.gapMs = gapMs
        self.replayed = replayed
        self.snapshot = snapshot
        self.upstream = upstream
        self.upstreamMistyped = upstreamMistyped
    }
}
