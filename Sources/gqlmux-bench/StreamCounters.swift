#if canImport(Glibc)
import Glibc
#endif

/// What a benchmark client counts in the bytes it receives, fed one read at a time: results,
/// and whether gqlmuxd closed the stream (a WebSocket close frame). The counters read raw bytes,
/// never decoding a message: a client must cost less than the daemon it measures.
protocol StreamCounter: Sendable {
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (results: Int, closes: Int)
}

/// Line-protocol results: one per line.
struct LineCounter: StreamCounter {
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (results: Int, closes: Int) {
        guard var cursor = bytes.baseAddress else { return (0, 0) }
        var remaining = bytes.count
        var count = 0
        while remaining > 0, let hit = memchr(cursor, 0x0A, remaining) {
            count += 1
            let advance = cursor.distance(to: UnsafeRawPointer(hit)) + 1
            cursor += advance
            remaining -= advance
        }
        return (count, 0)
    }
}

/// WebSocket results (`{"type":"next"` or graphql-ws's `{"type":"data"`: the byte at payload
/// offset 9) and close frames, reading only the frame headers (server frames are unmasked) and
/// one byte of each payload.
struct WebSocketFrameCounter: StreamCounter {
    /// The frame header being read (its bytes so far), the current frame's opcode, its payload
    /// bytes left to skip, and how many of them were skipped.
    private var header: UInt64 = 0
    private var headerCount = 0
    private var headerNeeded = 2
    private var opcode: UInt8 = 0
    private var remaining = 0
    private var position = 0

    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (results: Int, closes: Int) {
        var results = 0
        var closes = 0
        var at = 0
        let count = bytes.count
        while at < count {
            if remaining > 0 {
                let n = min(remaining, count - at)
                if opcode == 1, position <= 9, 9 < position + n {
                    let type = bytes[at + 9 - position]
                    if type == UInt8(ascii: "n") || type == UInt8(ascii: "d") { results += 1 }
                }
                at += n
                remaining -= n
                position += n
                continue
            }
            let byte = bytes[at]
            at += 1
            headerCount += 1
            if headerCount == 1 {
                opcode = byte & 0x0F
                continue
            }
            if headerCount == 2 {
                let short = Int(byte & 0x7F)
                headerNeeded = 2 + (short == 126 ? 2 : short == 127 ? 8 : 0)
                header = UInt64(short)
                if headerNeeded > 2 { header = 0 }
            } else {
                header = header << 8 | UInt64(byte)
            }
            guard headerCount == headerNeeded else { continue }
            remaining = Int(header)
            position = 0
            headerCount = 0
            if opcode == 8 { closes += 1 }
        }
        return (results, closes)
    }
}

/// HTTP stream results: each opens with a fixed marker (`event: next` for SSE, the end of a
/// part's head and `{"payload":` for multipart) that nothing else contains; a marker may
/// straddle two reads.
struct MarkerCounter: StreamCounter {
    private let marker: [UInt8]
    private var carry: [UInt8] = []

    init(_ marker: String) { self.marker = Array(marker.utf8) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (results: Int, closes: Int) {
        // A marker that straddles two reads: the last `count - 1` bytes of the previous read
        // and the first `count - 1` of this one (no whole marker fits in either part).
        let window = carry + bytes.prefix(marker.count - 1)
        var found = window.withUnsafeBytes { Self.count(marker, in: $0) }
        found += Self.count(marker, in: bytes)
        carry = Array(bytes.suffix(marker.count - 1))
        return (found, 0)
    }

    /// memchr for the marker's first byte, then memcmp.
    private static func count(_ marker: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int {
        guard bytes.count >= marker.count, let base = bytes.baseAddress else { return 0 }
        var found = 0
        var index = 0
        let last = bytes.count - marker.count
        marker.withUnsafeBytes { marker in
            while index <= last, let hit = memchr(base + index, Int32(marker[0]), last - index + 1) {
                let at = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + at, marker.baseAddress!, marker.count) == 0 {
                    found += 1
                    index = at + marker.count
                } else {
                    index = at + 1
                }
            }
        }
        return found
    }
}
