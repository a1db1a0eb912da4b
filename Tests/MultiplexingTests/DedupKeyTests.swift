import Multiplexing
import Testing

/// The 128-bit dedup key: the same text, the same key; different texts, different keys.
@Suite struct DedupKeyTests {
    @Test func theSameTextIsTheSameKeyAndDifferentTextsDiffer() {
        #expect(DedupKey("subscription{tick}\u{0}\u{0}null\u{0}null") == DedupKey("subscription{tick}\u{0}\u{0}null\u{0}null"))
        #expect(DedupKey("a\u{0}b") != DedupKey("a\u{0}c"))
        #expect(DedupKey("") != DedupKey("\u{0}"))
        // 200,000 distinct texts that differ in one small place: no two keys meet.
        var seen = Set<DedupKey>()
        for n in 0..<200_000 { seen.insert(DedupKey("subscription{price(id:\(n))}\u{0}\u{0}{\"n\":\(n % 7)}\u{0}null")) }
        #expect(seen.count == 200_000)
    }
}
