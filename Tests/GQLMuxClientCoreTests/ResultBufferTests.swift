import Synchronization
import Testing

@testable import GQLMuxClientCore

/// The bounded buffer between a client connection and the task iterating a subscription: order,
/// the pressure it reports (full at capacity, drained at half), the end after what is buffered,
/// and a cancel that drops it all.
@Suite struct ResultBufferTests {
    final class Pressure: Sendable {
        let told = Mutex<[Bool]>([])
        var all: [Bool] { told.withLock { $0 } }
    }

    static func result(_ n: Int) -> GQLMuxResult { GQLMuxResult(json: #"{"data":{"n":\#(n)}}"#) }

    @Test func resultsComeInOrderAndPressureIsToldOnceEachWay() async throws {
        let pressure = Pressure()
        let buffer = ResultBuffer(capacity: 4) { full in pressure.told.withLock { $0.append(full) } }
        for n in 1...6 { buffer.push(Self.result(n)) }
        #expect(pressure.all == [true], "full at 4, told once however many more come")
        #expect(buffer.count == 6)
        var seen: [String] = []
        for _ in 1...4 { seen.append(try await buffer.next(onCancel: {})?.json ?? "end") }
        #expect(pressure.all == [true, false], "drained at half the capacity (2 left)")
        buffer.finish(nil)
        while let result = try await buffer.next(onCancel: {}) { seen.append(result.json) }
        #expect(seen == (1...6).map { Self.result($0).json }, "the end comes after every buffered result")
        buffer.push(Self.result(7))
        #expect(try await buffer.next(onCancel: {}) == nil, "nothing after the end")
    }

    @Test func anErrorEndsTheSequenceAfterTheBufferedResults() async throws {
        struct Ended: Error {}
        let buffer = ResultBuffer(capacity: 8) { _ in }
        buffer.push(Self.result(1))
        buffer.finish(Ended())
        #expect(try await buffer.next(onCancel: {}) == Self.result(1))
        await #expect(throws: Ended.self) { try await buffer.next(onCancel: {}) }
        #expect(try await buffer.next(onCancel: {}) == nil, "the error is thrown once")
    }

    @Test func aWaitingConsumerIsHandedTheNextResultAndThenTheEnd() async throws {
        let buffer = ResultBuffer(capacity: 2) { _ in }
        let waiting = Task { try await buffer.next(onCancel: {}) }
        // Pushed to the waiter, not buffered: once it waits, nothing is left behind.
        try await waitUntilWaiting(buffer)
        buffer.push(Self.result(1))
        #expect(try await waiting.value == Self.result(1))
        #expect(buffer.count == 0, "handed over, not buffered")
        let ending = Task { try await buffer.next(onCancel: {}) }
        try await waitUntilWaiting(buffer)
        buffer.finish(nil)
        #expect(try await ending.value == nil, "the end reaches a consumer already waiting")
    }

    /// Returns once a consumer waits (a result pushed before would be buffered instead).
    private func waitUntilWaiting(_ buffer: ResultBuffer) async throws {
        for _ in 0..<1_000 where !buffer.hasWaiter { try await Task.sleep(for: .milliseconds(1)) }
        #expect(buffer.hasWaiter)
    }

    @Test func cancelDropsWhatIsBufferedAndReleasesThePressure() async throws {
        let pressure = Pressure()
        let buffer = ResultBuffer(capacity: 2) { full in pressure.told.withLock { $0.append(full) } }
        buffer.push(Self.result(1))
        buffer.push(Self.result(2))
        buffer.cancel()
        #expect(pressure.all == [true, false], "a full buffer cancelled lets the connection read again")
        #expect(buffer.count == 0)
        #expect(try await buffer.next(onCancel: {}) == nil)
    }
}
