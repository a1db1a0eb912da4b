import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// sd_notify: lifecycle messages to the service manager. Nothing is sent when
/// `NOTIFY_SOCKET` is unset (not run by systemd).
package struct SystemdNotifier: Sendable {
    package init() {}

    /// True when a service manager listens (`NOTIFY_SOCKET` is set).
    package var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends raw `KEY=value` lines.
    package func send(_ lines: String...) {
        guard isEnabled else { return }
        _ = sd_notify(0, lines.joined(separator: "\n"))
    }

    package func ready(status: String? = nil) {
        if let status { send("READY=1", "STATUS=\(Self.oneLine(status))") } else { send("READY=1") }
    }

    package func status(_ line: String) { send("STATUS=\(Self.oneLine(line))") }

    /// Before a reload: `RELOADING=1` with the monotonic timestamp systemd 253+ expects.
    package func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        send("RELOADING=1", "MONOTONIC_USEC=\(usec)")
    }

    package func stopping(status: String = "stopping") { send("STOPPING=1", "STATUS=\(Self.oneLine(status))") }

    package func watchdog() { send("WATCHDOG=1") }

    /// Start-up failed: `ERRNO=` and a last status line.
    package func failed(errno code: Int32, status: String) { send("ERRNO=\(code)", "STATUS=\(Self.oneLine(status))") }

    /// The watchdog interval requested by the service manager, if any.
    package var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(usec))
    }

    /// `text` as one `STATUS=` value: systemd splits a notification into assignments at every
    /// CR and LF, so a CR left in (a server's close reason, a `connection_error` message) would
    /// be a command of its own (`WATCHDOG=trigger`, `STOPPING=1`, `FDSTOREREMOVE=1`). Every
    /// control character (C0, DEL, C1), and the Unicode line and paragraph separators, becomes a
    /// space; at most `maxStatusBytes` bytes of it are kept, cut at a character.
    package static func oneLine(_ text: String) -> String {
        var line = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            let shown: Unicode.Scalar =
                scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}" ? " " : scalar
            bytes += UTF8.width(shown)
            guard bytes <= maxStatusBytes else { break }
            line.append(shown)
        }
        return String(line)
    }

    /// The longest `STATUS=` value sent (systemd shows one line; a notification is one datagram).
    package static let maxStatusBytes = 2_048
}
