import GQLMuxVocabulary
import Testing

@testable import GQLMuxDaemon

/// What the journal says of an upstream's connections names its URL as every local user may
/// see it: no query string (where some servers take a key), no user info.
@Suite struct UpstreamEventLogTests {
    @Test func theJournalNamesTheURLWithoutItsQuery() {
        let log = EventLog()
        let events = UpstreamEventLog(events: log.events, metrics: DaemonMetrics())
        let context = (url: "wss://api.example/graphql?apikey=secret", wire: "graphql-ws", reconnects: 1)
        events.record(.stateChanged(.connecting(attempt: 1)), connection: 0, context: context)
        events.record(.connected, connection: 0, context: context)
        events.record(.reconnected, connection: 0, context: context)
        let told = [DaemonEvent.connecting, .connected, .reconnected].flatMap { log.all($0) }
        #expect(told.count == 3)
        for fields in told {
            #expect(fields["GQLMUX_URL"] == "wss://api.example/graphql")
            #expect(!fields.values.contains { $0.contains("secret") }, "\(fields)")
        }
        #expect(log.messages.allSatisfy { !$0.contains("secret") }, "\(log.messages)")
    }
}
