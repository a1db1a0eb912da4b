import Testing

/// Polls `condition` every 10 ms until it holds, or records an issue after `seconds`: for
/// state nothing signals (a client library subscription's state, a file appearing, a child
/// process's output). What a ``Changing`` helper holds is waited on with
/// ``until(_:within:on:sourceLocation:_:)``, and the test upstream's counters with
/// ``until(_:within:upstream:also:sourceLocation:_:)``: both check at each change, never on a
/// timer.
package func eventually(
    _ what: String,
    within seconds: Double = 10,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        // A cancelled test (past its time limit) stops here instead of spinning to the deadline.
        guard !Task.isCancelled else {
            Issue.record("cancelled while waiting for: \(what)", sourceLocation: sourceLocation)
            return
        }
        try? await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out after \(seconds)s waiting for: \(what)", sourceLocation: sourceLocation)
}
