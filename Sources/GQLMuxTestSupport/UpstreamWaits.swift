import TestUpstream
import Testing

/// Returns once `condition` holds of the test upstream's counters: checked now and again after
/// each change of them, never on a timer; records an issue at the caller after `seconds`
/// without it. Whatever else the condition reads must change only with the counters or be
/// passed in `also` (a test client's lines, a recorder): a change nobody signals is not seen
/// until the next change of the counters. A client library subscription signals nobody: wait
/// on it with ``eventually(_:within:sourceLocation:_:)``.
package func until(
    _ what: String,
    within seconds: Double = 10,
    upstream server: TestUpstreamServer,
    also sources: any Changing...,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: (TestUpstreamStats) async -> Bool
) async {
    let changes = Changes.merging(sources.map(\.changes))
    let key = server.statsObservers.add { changes.changed() }
    defer { server.statsObservers.remove(key) }
    await changes.until(what, within: seconds, sourceLocation: sourceLocation) { await condition(await server.currentStats) }
}
