/// Text as a terminal shows it, in columns. Names come from local apps (`connection_init`'s
/// `client`, a process name), so a cell never carries what a terminal would act on: controls,
/// escape sequences, format and combining characters are shown as `?`. Pure.
enum TextCell {
    /// `text` safe to print: every scalar a terminal would act on, or would not show as one
    /// narrow or wide glyph, becomes `?`; with `unicode` false (the locale is not UTF-8)
    /// everything outside printable ASCII does.
    static func sanitized(_ text: String, unicode: Bool = true) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            out.append(isShown(scalar, unicode: unicode) ? scalar : "?")
        }
        return String(out)
    }

    static func isShown(_ scalar: Unicode.Scalar, unicode: Bool) -> Bool {
        if scalar.value >= 0x20 && scalar.value < 0x7F { return true }
        guard unicode, scalar.value >= 0xA0 else { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator,
            .nonspacingMark, .spacingMark, .enclosingMark:
            return false
        default:
            return true
        }
    }

    /// Columns `scalar` takes: 2 for East Asian wide and emoji blocks, else 1 (`text` is sanitized).
    static func width(of scalar: Unicode.Scalar) -> Int {
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F,
            0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// Columns a sanitized `text` takes.
    static func width(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { $0 + width(of: $1) }
    }

    /// `text` cut to at most `columns`, ending in `…` (or `~` without unicode) when cut.
    static func truncated(_ text: String, to columns: Int, unicode: Bool = true) -> String {
        guard columns > 0 else { return "" }
        guard width(text) > columns else { return text }
        var out = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let w = width(of: scalar)
            guard used + w <= columns - 1 else { break }
            out.append(scalar)
            used += w
        }
        out.append(unicode ? "…" : "~")
        return String(out)
    }

    /// `text` cut or padded with spaces to exactly `columns`, on the left for `right` alignment.
    static func fitted(_ text: String, to columns: Int, right: Bool = false, unicode: Bool = true) -> String {
        let cut = truncated(text, to: columns, unicode: unicode)
        let pad = String(repeating: " ", count: max(0, columns - width(cut)))
        return right ? pad + cut : cut + pad
    }
}
