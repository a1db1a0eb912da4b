/// The multiplexer's name for "the same subscription": 128 bits derived from the canonical
/// dedup text (document tokens, operation name, variables, extensions), so a subscription
/// keeps 16 bytes for it instead of its whole text (about 140 bytes with the allocation).
///
/// Two independent 64-bit SipHash values from the process's random hashing seed: a collision
/// between two different texts is about as likely as guessing a 128-bit number, and an app
/// cannot craft one to read another app's stream, because it does not know the seed.
package struct DedupKey: Hashable, Sendable, ExpressibleByStringLiteral {
    private let high: Int
    private let low: Int

    package init(_ text: String) {
        var first = Hasher()
        first.combine(UInt8(0))
        first.combine(text)
        var second = Hasher()
        second.combine(UInt8(1))
        second.combine(text)
        high = first.finalize()
        low = second.finalize()
    }

    package init(stringLiteral text: String) { self.init(text) }
}
