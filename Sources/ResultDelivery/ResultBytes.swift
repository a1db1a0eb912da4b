import LocalEndpoint

/// Results framed on the hot path, for one subscriber's batch (``ClientSession``) or for all of
/// a run's subscribers at once (``SharedFrames``): each as header, prefix, payload and suffix,
/// the few bytes around each payload copied inline (through `memmove`, a call per result for
/// so few bytes cost more than the copy).
package enum ResultBytes {
    /// How many of `bodies[next...]`, each with `fixed` bytes of framing, fit in `room` bytes,
    /// and at least one: the end of those results and their bytes.
    @inline(__always)
    package static func fitting(_ bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>, from next: Int, fixed: Int, room: Int) -> (end: Int, bytes: Int) {
        var end = next + 1
        var bytes = fixed + bodies[next].count
        while end < bodies.endIndex, bytes + fixed + bodies[end].count <= room {
            bytes += fixed + bodies[end].count
            end += 1
        }
        return (end, bytes)
    }

    /// Writes `bodies[range]` at `out`, each as header (a WebSocket frame's when `header`),
    /// prefix, payload and `tail`, and tells `place` where each prefix begins (its offset from
    /// `out`). Returns the bytes written.
    @inline(__always)
    package static func frame(
        _ bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>,
        _ range: Range<Int>,
        header: Bool,
        prefix: UnsafeRawBufferPointer,
        tail: UnsafeBufferPointer<UInt8>,
        to out: UnsafeMutableRawPointer,
        place: (Int) -> Void = { _ in }
    ) -> Int {
        var at = out
        for index in range {
            let body = bodies[index]
            if header { at += FrameHeader.write(length: prefix.count + body.count + tail.count, to: at) }
            place(at - out)
            short(prefix, to: at)
            at += prefix.count
            if let source = body.baseAddress { at.copyMemory(from: source, byteCount: body.count) }
            at += body.count
            Self.tail(tail, to: at)
            at += tail.count
        }
        return at - out
    }

    /// A prefix (tens of bytes): copied a word at a time, the last word overlapping.
    @inline(__always)
    package static func short(_ bytes: UnsafeRawBufferPointer, to out: UnsafeMutableRawPointer) {
        let count = bytes.count
        guard count >= 8, let source = bytes.baseAddress else {
            for index in 0..<count { out.storeBytes(of: bytes[index], toByteOffset: index, as: UInt8.self) }
            return
        }
        guard count <= 64 else { return out.copyMemory(from: source, byteCount: count) }
        var offset = 0
        while offset < count - 8 {
            out.storeBytes(of: source.loadUnaligned(fromByteOffset: offset, as: UInt64.self), toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        out.storeBytes(of: source.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self), toByteOffset: count - 8, as: UInt64.self)
    }

    /// A framing's suffix after a payload: byte by byte when short (`}\n`), else as two
    /// overlapping words (multipart's 12 bytes: byte stores were 3 % of its fan-out time).
    @inline(__always)
    package static func tail(_ tail: UnsafeBufferPointer<UInt8>, to out: UnsafeMutableRawPointer) {
        let count = tail.count
        guard count >= 8, count <= 16, let source = tail.baseAddress else {
            for index in 0..<count { out.storeBytes(of: tail[index], toByteOffset: index, as: UInt8.self) }
            return
        }
        let raw = UnsafeRawPointer(source)
        out.storeBytes(of: raw.loadUnaligned(as: UInt64.self), as: UInt64.self)
        out.storeBytes(of: raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self), toByteOffset: count - 8, as: UInt64.self)
    }
}
