import Testing

/// Polls `condition` every 10 ms until it holds, or records an issue after `seconds`.
/// Tests wait for real events this way instead of sleeping a fixed time.
package func eventually(
    _ what: String,
    within seconds: Double = 10,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out after \(seconds)s waiting for: \(what)", sourceLocation: sourceLocation)
}
