import LocalEndpoint
import NIOCore

/// A run's results framed once for every subscriber of one framing whose prefixes have one
/// length, instead of copied into each subscriber's batch: frames of about
/// ``ResultWriter/batchChunkBytes`` and the place of each result's prefix in them. Before a
/// subscriber's write, ``hold(_:)`` writes its own prefix (the one part that names its
/// operation id) into those places: tens of bytes per result instead of the whole result. The
/// payloads' bytes are framed once and written from the same memory to every subscriber,
/// warm in the cache.
///
/// What a subscriber was handed never changes: a frame NIO still holds (its client's socket
/// had no room) is copied before a prefix is written into it (`ByteBuffer`'s copy on write),
/// and the subscribers after it get the copy. So a slow reader costs a copy of the frames, as a
/// batch of its own did, and a fast one none. Subscribers whose prefixes are the same bytes (an
/// HTTP stream's, which name no operation) share the frames without any write.
///
/// | framing | a frame is |
/// |---|---|
/// | line protocol | lines |
/// | WebSocket (both protocols) | whole WebSocket messages, each with its header |
/// | SSE, multipart | one sealed HTTP/1.1 chunk |
package struct SharedFrames {
    package let framing: NextFraming
    package let prefixLength: Int
    /// The framed results, in order.
    private(set) var frames: [ByteBuffer] = []
    /// Where each result's prefix lies: its index in its frame's storage (from the frame's
    /// start, not its reader index, which sealing an HTTP chunk moves).
    private var places: [Int] = []
    /// `ends[k]`: the end of frame k's places in `places`.
    private var ends: [Int] = []

    /// The arrays one run's frames were described in, emptied with their capacity kept, for the
    /// next run's (``recycle(into:limit:spares:)``): a lone result's frames then allocate
    /// nothing but what NIO still holds.
    package struct Spare {
        fileprivate var frames: [ByteBuffer] = []
        fileprivate var places: [Int] = []
        fileprivate var ends: [Int] = []
    }

    /// Frames `bodies` (the payloads of a run, in order) in `framing`, each after `prefix`, in
    /// buffers taken from `stock` when it has any (their memory reused when nothing else
    /// holds them), described in arrays taken from `spares` when it has any.
    package init(
        framing: NextFraming,
        prefix: UnsafeRawBufferPointer,
        bodies: UnsafeBufferPointer<UnsafeRawBufferPointer>,
        stock: inout [ByteBuffer],
        spares: inout [Spare]
    ) {
        self.framing = framing
        prefixLength = prefix.count
        let header = framing.hasHeader
        let chunked = framing.isChunked
        let limit = ResultWriter.batchChunkBytes
        let spare = spares.popLast() ?? Spare()
        var frames = spare.frames
        var places = spare.places
        var ends = spare.ends
        places.reserveCapacity(bodies.count)
        framing.suffix.withUTF8Buffer { tail in
            let fixed = (header ? NextFraming.maxHeaderBytes : 0) + prefix.count + tail.count
            var next = bodies.startIndex
            while next < bodies.endIndex {
                let (end, bytes) = ResultBytes.fitting(bodies, from: next, fixed: fixed, room: limit)
                var frame = stock.popLast() ?? ByteBuffer()
                frame.clear(minimumCapacity: bytes + (chunked ? NextFraming.chunkHeaderRoom + 2 : 0))
                if chunked { frame.writeRepeatingByte(0, count: NextFraming.chunkHeaderRoom) }
                let base = frame.writerIndex
                frame.writeWithUnsafeMutableBytes(minimumWritableBytes: bytes) { out in
                    ResultBytes.frame(bodies, next..<end, header: header, prefix: prefix, tail: tail, to: out.baseAddress!) { places.append(base + $0) }
                }
                if chunked { NextFraming.sealChunk(&frame) }
                frames.append(frame)
                ends.append(places.count)
                next = end
            }
        }
        self.frames = frames
        self.places = places
        self.ends = ends
    }

    /// Whether a subscriber in `framing` with a prefix of `prefixLength` bytes can be handed
    /// these frames.
    @inline(__always)
    package func fits(_ framing: NextFraming, prefixLength: Int) -> Bool {
        self.prefixLength == prefixLength && self.framing == framing
    }

    /// Makes `prefix` (``prefixLength`` bytes) every result's prefix: only the bytes where it
    /// differs from the prefix the frames hold now are written (a line prefix differs from the
    /// last subscriber's in its id alone, often in one byte), and nothing when it is the same.
    /// A frame something else still holds is copied first.
    package mutating func hold(_ prefix: UnsafeRawBufferPointer) {
        precondition(prefix.count == prefixLength, "a prefix of another length needs frames of its own")
        guard let changed = difference(from: prefix) else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: prefix[changed])
        let offset = changed.lowerBound
        var start = 0
        for index in frames.indices {
            let end = ends[index]
            let origin = frames[index].readerIndex
            places.withUnsafeBufferPointer { places in
                frames[index].withUnsafeMutableReadableBytes { frame in
                    let base = frame.baseAddress! - origin + offset
                    for place in places[start..<end] { ResultBytes.short(bytes, to: base + place) }
                }
            }
            start = end
        }
    }

    /// The bytes of `prefix` that differ from the prefix the frames hold now (all places are
    /// written together, so the first tells), from the first such byte to the last; nil when
    /// none does.
    private func difference(from prefix: UnsafeRawBufferPointer) -> Range<Int>? {
        guard let first = places.first, let frame = frames.first else { return nil }
        let origin = frame.readerIndex
        return frame.withUnsafeReadableBytes { frame in
            let held = UnsafeRawBufferPointer(rebasing: frame[(first - origin)...].prefix(prefixLength))
            guard let low = prefix.indices.first(where: { prefix[$0] != held[$0] }) else { return nil }
            let high = prefix.indices.last { prefix[$0] != held[$0] }!
            return low..<(high + 1)
        }
    }

    /// Gives the frames' buffers back to `stock` for the next run's frames (at most `limit`
    /// kept there), and holds none of them any more: a buffer nothing else holds is then reused
    /// as it is, its memory already faulted in. Only buffers of a frame's usual size are kept: a
    /// client's id can be as long as a line, and a run framed after a megabyte of prefix must not
    /// leave megabytes kept outside the memory budget.
    /// Its arrays, emptied, go to `spares` (at most `limit` kept there too, and only arrays of
    /// a usual run's size).
    package mutating func recycle(into stock: inout [ByteBuffer], limit: Int, spares: inout [Spare]) {
        for frame in frames where stock.count < limit && frame.capacity <= Self.keptCapacity { stock.append(frame) }
        frames.removeAll(keepingCapacity: frames.capacity <= Self.keptPlaces)
        places.removeAll(keepingCapacity: places.capacity <= Self.keptPlaces)
        ends.removeAll(keepingCapacity: ends.capacity <= Self.keptPlaces)
        if spares.count < limit { spares.append(Spare(frames: frames, places: places, ends: ends)) }
        frames = []
        places = []
        ends = []
    }

    /// The most prefix places a kept ``Spare`` holds room for: a run of the fan-out's largest
    /// (``Fanout/runBytes``) of small results.
    package static let keptPlaces = 4_096

    /// The largest buffer ``recycle(into:limit:spares:)`` keeps: a frame of results under
    /// ``ResultWriter/sharedPayloadBytes`` with prefixes of usual length.
    package static let keptCapacity = 2 * ResultWriter.batchChunkBytes
}
