import NIOCore

/// A proxy's answer to `CONNECT`, read from the bytes as they come: nothing decided until the
/// head ends (`\r\n\r\n`); then the tunnel is open (2xx) with any bytes after the head already
/// the server's, or refused with the proxy's status line. Bounded: a head longer than
/// ``maxHeadBytes`` is refused, so a peer that is not an HTTP proxy cannot make us buffer.
package struct ProxyAnswer: Sendable {
    package enum Outcome: Sendable, Equatable {
        case incomplete
        /// 2xx: bytes after the head belong to the tunnel.
        case open(rest: ByteBuffer)
        /// Anything else, with a reason for the operator ("CONNECT refused: HTTP 407 …").
        case refused(String)
    }

    package static let maxHeadBytes = 16 * 1024
    private var head = ByteBuffer()
    /// Bytes of `head` already searched for the head's end (each byte is searched once).
    private var searched = 0

    package init() {}

    package mutating func feed(_ bytes: ByteBuffer) -> Outcome {
        var bytes = bytes
        head.writeBuffer(&bytes)
        let from = head.readerIndex + max(0, searched - 3)  // an end may straddle two feeds
        let end = head.readableBytesView[from...].firstRange(of: [13, 10, 13, 10])
        searched = head.readableBytes
        guard let end, end.upperBound - head.readerIndex <= Self.maxHeadBytes else {
            // However the bytes came: a head that does not end within the bound is refused.
            return end != nil || head.readableBytes > Self.maxHeadBytes
                ? .refused("its answer to CONNECT has no end within \(Self.maxHeadBytes) bytes (not an HTTP proxy?)") : .incomplete
        }
        let headBytes = head.readSlice(length: end.upperBound - head.readerIndex)!
        let rest = head
        head = ByteBuffer()
        searched = 0
        let line = headBytes.readableBytesView.prefix { $0 != 13 }
        let shown = String(decoding: line.prefix(120), as: UTF8.self)
        let parts = shown.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            return .refused("its answer to CONNECT is not HTTP: '\(shown.prefix(80))'")
        }
        guard (200..<300).contains(status) else {
            return .refused("CONNECT refused: HTTP \(parts.dropFirst().joined(separator: " "))")
        }
        return .open(rest: rest)
    }
}
