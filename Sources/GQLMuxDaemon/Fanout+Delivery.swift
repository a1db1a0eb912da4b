import Multiplexing
import NIOCore

/// The fan-out's unsafe code, all of it: the hot path reads each subscriber's session and line
/// prefix without reference counting (retain/release pairs were 13 % of fan-out time with 100
/// subscribers, 18 % with 500).
///
/// Invariant: a ``Fanout/Delivery`` owns a ``Fanout/SubscriberSink``, and the sink owns what the
/// delivery's two plain values point at: `handle` is its `session`, held strongly for the
/// sink's whole life, and `prefixBytes` is storage the sink allocated itself in `init`, wrote
/// only there and frees only in `deinit`. So both are valid for as long as the `Delivery` value
/// that carries them is reachable, and nothing else can move or free them.
extension Fanout {
    /// One subscriber's session and its encoded `next` prefix, owned.
    final class SubscriberSink {
        let session: ClientSession
        /// `{"type":"next","id":LOCAL_ID,"payload":`, in storage this sink allocated.
        fileprivate let prefix: UnsafeMutableRawBufferPointer

        init(session: ClientSession, prefix encoded: ByteBuffer) {
            self.session = session
            prefix = .allocate(byteCount: encoded.readableBytes, alignment: 1)
            encoded.withUnsafeReadableBytes { prefix.copyMemory(from: $0) }
        }

        deinit { prefix.deallocate() }
    }

    /// What the hot path needs per subscriber, as plain values (see the invariant above).
    struct Delivery {
        let sink: SubscriberSink
        /// `sink.session`, unretained.
        let handle: Unmanaged<ClientSession>
        /// `sink.prefix`, read only.
        let prefixBytes: UnsafeRawBufferPointer

        /// One allocation for the prefix (a `ByteBuffer` takes two, 60 bytes more per idle
        /// subscription) and one for the sink.
        init(session: ClientSession, prefix: ByteBuffer) {
            sink = SubscriberSink(session: session, prefix: prefix)
            handle = Unmanaged.passUnretained(session)
            prefixBytes = UnsafeRawBufferPointer(sink.prefix)
        }

        var session: ClientSession { sink.session }
    }

    /// Writes one `next` line to every subscriber of an operation: the core's list read in
    /// place, the payload's bytes taken once. Returns how many were written.
    func deliver(_ payload: ByteBuffer, to subscribers: [Core.Subscriber]) -> Int {
        deliver(payload, to: subscribers) { _ in true }
    }

    /// The same, to the subscribers `including` accepts only (while some wait for a snapshot).
    /// Inlined into both callers, so the hot path's closure is a constant the optimizer removes.
    @inline(__always)
    func deliver(_ payload: ByteBuffer, to subscribers: [Core.Subscriber], including: (Core.Subscriber) -> Bool) -> Int {
        var delivered = 0
        payload.withUnsafeReadableBytes { body in
            subscribers.withUnsafeBufferPointer { subscribers in
                for index in subscribers.indices where including(subscribers[index]) {
                    if write(body, payload, to: subscribers[index].tag) { delivered += 1 }
                }
            }
        }
        return delivered
    }

    /// One result to one subscriber (its prefix, the payload's bytes, its suffix), marked for
    /// the next flush; false when its session is closing.
    @inline(__always)
    func write(_ body: UnsafeRawBufferPointer, _ payload: borrowing ByteBuffer, to delivery: Delivery) -> Bool {
        let head = delivery.prefixBytes
        return delivery.handle._withUnsafeGuaranteedRef { session in
            guard session.writeNext(prefix: head, body: body, payload: payload) else { return false }
            markDirty(session)
            return true
        }
    }
}
