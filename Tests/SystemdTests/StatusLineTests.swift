import SystemdSupport
import Testing

/// A `STATUS=` value is one line whatever the text holds: systemd splits a notification at every
/// CR and LF, so what a server wrote (a close reason, an error message) cannot add a command.
@Suite struct StatusLineTests {
    @Test func everyLineBreakAndControlCharacterBecomesASpace() {
        let text = "a\rWATCHDOG=trigger\r\nSTOPPING=1\nb\u{0}c\u{7F}d\u{85}e\u{2028}f\u{2029}g\tz"
        let line = SystemdNotifier.oneLine(text)
        #expect(line == "a WATCHDOG=trigger  STOPPING=1 b c d e f g z", "CR LF is two characters, two spaces")
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(SystemdNotifier.oneLine("connected to wss://h/g; 2 clients — é") == "connected to wss://h/g; 2 clients — é", "printable text is kept")
    }

    @Test func aLongLineIsCutAtACharacter() {
        let line = SystemdNotifier.oneLine(String(repeating: "é", count: SystemdNotifier.maxStatusBytes))
        #expect(line.utf8.count <= SystemdNotifier.maxStatusBytes && line.utf8.count >= SystemdNotifier.maxStatusBytes - 1)
        #expect(line.allSatisfy { $0 == "é" })
    }
}
