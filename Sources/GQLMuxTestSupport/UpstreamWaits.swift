import TestUpstream
import Testing

/// Returns once `condition` holds of the test upstream's counters: checked now and again after
/// each change of them (and of any of `sources`, when the condition reads those too), never on
/// a timer; records an issue at the caller after `seconds` without it.
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
