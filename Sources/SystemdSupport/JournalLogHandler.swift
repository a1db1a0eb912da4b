import CSystemd
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler for gqlmuxd. To the journal it writes native entries with
/// `sd_journal_sendv`: `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `CODE_FILE/CODE_LINE/CODE_FUNC`,
/// and every metadata key as an upper-case journal field. To stderr it writes plain lines:
/// `gqlmuxd: <level>: message KEY=value …`.
package struct JournalLogHandler: LogHandler {
    package enum Destination: Sendable {
        case journal, stderr
    }

    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    private let identifier: String
    private let destination: Destination

    package init(identifier: String, level: Logger.Level, destination: Destination) {
        self.identifier = identifier
        self.logLevel = level
        self.destination = destination
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        switch destination {
        case .journal: writeJournal(event, merged)
        case .stderr: writeStderr(event, merged)
        }
    }

    private func writeJournal(_ event: LogEvent, _ merged: Logger.Metadata) {
        var fields: [String] = [
            "MESSAGE=\(Self.escaped(event.message.description))",
            "PRIORITY=\(Self.priority(event.level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        for (key, value) in merged {
            guard let name = Self.fieldName(key) else { continue }
            fields.append("\(name)=\(Self.escaped(value.description))")
        }
        Self.send(fields)
    }

    /// Writes one entry; each element is `FIELD=value` (values may hold newlines).
    static func send(_ fields: [String]) {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = bytes.count
            bytes.append(contentsOf: field.utf8)
            ranges.append(start..<bytes.count)
        }
        bytes.withUnsafeMutableBytes { raw in
            var vectors = ranges.map { iovec(iov_base: raw.baseAddress! + $0.lowerBound, iov_len: $0.count) }
            _ = sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }

    /// syslog priorities: 7 debug … 2 critical.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// A valid journal field name: `[A-Z0-9_]`, not starting with `_` or a digit, ≤ 64 bytes.
    package static func fieldName(_ key: String) -> String? {
        var name = String(
            key.uppercased().unicodeScalars.map { scalar -> Character in
                switch scalar {
                case "A"..."Z", "0"..."9", "_": Character(scalar)
                default: "_"
                }
            }
        )
        while name.hasPrefix("_") { name.removeFirst() }
        guard !name.isEmpty else { return nil }
        if name.first!.isNumber { name = "F_" + name }
        return String(name.prefix(64))
    }

    /// `text` with every control character written as an escape (`\n`, `\r`, `\t`, `\xNN`) and
    /// a backslash doubled, so what a client names itself (or sends) can neither start a line
    /// of its own on stderr nor hide in an entry.
    package static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0) || $0 == "\\" }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            case _ where isControl(scalar):
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// C0, DEL and C1 control characters.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// A field's value on a stderr line: quoted (`"…"`, a quote escaped) when it holds a space,
    /// `=` or a quote, so a value cannot pass itself off as another field.
    package static func fieldValue(_ value: String) -> String {
        guard value.contains(where: { $0 == " " || $0 == "=" || $0 == "\"" }) || value.isEmpty else { return value }
        var quoted = "\""
        for character in value { quoted += character == "\"" ? "\\\"" : String(character) }
        return quoted + "\""
    }

    /// True when stderr is the journal stream systemd set up (`JOURNAL_STREAM=dev:ino`).
    package static var stderrIsJournal: Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return value == "\(info.st_dev):\(info.st_ino)"
    }

    private func writeStderr(_ event: LogEvent, _ merged: Logger.Metadata) {
        let extra = merged.sorted { $0.key < $1.key }
            .filter { $0.key != "MESSAGE_ID" }
            .map { "\($0.key)=\(Self.fieldValue(Self.escaped($0.value.description)))" }.joined(separator: " ")
        let line = "\(identifier): \(event.level): \(Self.escaped(event.message.description))" + (extra.isEmpty ? "" : " \(extra)") + "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}
