import Testing

@testable import GQLMuxCtlCommand

/// `gqlmuxctl status` prints what a server wrote (a close reason, in `detail`): never as
/// something the terminal acts on.
@Suite struct StatusSummaryTests {
    @Test func aServersWordsCannotDriveTheTerminal() {
        let json = #"""
            {"upstream":{"url":"wss://h/g","detail":"reconnecting in 1.0s (attempt 1): upstream closed 1011 \u001b]0;pwned\u0007\u001b[2J","protocol":"graphql-ws","reconnects":2,"connections":[]},"clients":1,"subscriptions":{"local":1,"upstream":1},"messages":{"in":3,"out":4}}
            """#
        let shown = Status.human(json)
        #expect(!shown.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(shown)")
        #expect(shown.contains("upstream closed 1011 ?]0;pwned??[2J"))
        #expect(shown.contains("upstream:      wss://h/g — reconnecting in 1.0s"))
    }
}
