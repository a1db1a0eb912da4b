import SystemdSupport
import Testing

/// Log text from clients (a name, a reason) cannot forge lines: control characters are escapes
/// on every target, and a backslash is doubled so an escape cannot be faked either.
@Suite struct LogEscapeTests {
    @Test func controlCharactersAndBackslashesAreEscaped() {
        #expect(JournalLogHandler.escaped("app") == "app")
        #expect(JournalLogHandler.escaped("evil\ngqlmuxd: notice: stopping") == "evil\\ngqlmuxd: notice: stopping")
        #expect(JournalLogHandler.escaped("a\r\tb\u{1B}[2Jc\u{7F}") == "a\\r\\tb\\x1b[2Jc\\x7f")
        #expect(JournalLogHandler.escaped("not\\na newline") == "not\\\\na newline")
        #expect(JournalLogHandler.escaped("ünïcode ✓") == "ünïcode ✓")
        #expect(JournalLogHandler.escaped("c1\u{85}\u{9B}") == "c1\\x85\\x9b")
    }

    @Test func aFieldValueCannotPassItselfOffAsAnotherField() {
        #expect(JournalLogHandler.fieldValue("plain") == "plain")
        #expect(JournalLogHandler.fieldValue("x GQLMUX_PEER_UID=0") == "\"x GQLMUX_PEER_UID=0\"")
        #expect(JournalLogHandler.fieldValue("say \"hi\"") == "\"say \\\"hi\\\"\"")
    }
}
