import NIOCore

/// One written batch's memory, kept for the next large batch of any client on the loop. When
/// NIO has written a batch (the usual case: the client's socket had room), the next client's
/// share of a run is copied into the same memory while it is still in the cache, instead of
/// freeing 34 KiB and faulting in another. A batch NIO still holds (a client behind) is never
/// written to: `clear(minimumCapacity:)` then allocates fresh memory, and never copies. So a
/// slow reader costs what it did before, and a fast one costs no allocation at all.
///
/// Only batches of at least ``minimumBytes`` come and go here: a small write to a stuck client
/// must not pin a whole chunk's memory (the memory budget counts bytes written, not capacity).
/// It holds at most one buffer. Used on the daemon's loop only, by the sessions the fan-out
/// writes to.
package final class BatchSpare {
    private var spare: ByteBuffer?

    package init() {}

    /// Batches smaller than this are sized to what they carry, as before.
    package static let minimumBytes = 8 * 1_024

    /// The kept memory, emptied, with room for `capacity` bytes; nil when none is kept.
    package func take(capacity: Int) -> ByteBuffer? {
        guard var reused = spare else { return nil }
        spare = nil
        reused.clear(minimumCapacity: capacity)
        return reused
    }

    /// Keeps `batch` (just handed to NIO) for the next large batch, if it is one.
    package func keep(_ batch: ByteBuffer) {
        guard batch.capacity >= Self.minimumBytes else { return }
        spare = batch
    }
}
