extension StringProtocol {
    /// The text without the given characters at either end: HTTP's optional whitespace (space
    /// and tab) by default; `" \t\r\n"` for a file's contents.
    package func trimming(_ characters: String = " \t") -> String {
        let scalars = unicodeScalars
        let isTrimmed = { (scalar: Unicode.Scalar) in characters.unicodeScalars.contains(scalar) }
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }), let last = scalars.lastIndex(where: { !isTrimmed($0) }) else {
            return ""
        }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
