import GQLMuxVocabulary
import HTTPFields

/// A media type of a `Content-Type` or `Accept` header, matched exactly: `type/subtype` in any
/// case, then parameters (`charset`, `q`, `subscriptionSpec`). `application/jsonx` is not JSON.
package struct MediaType: Sendable, Equatable {
    /// `type/subtype`, lower-cased.
    package var essence: String
    /// Parameter names lower-cased, values unquoted.
    package var parameters: [String: String]

    /// nil when `text` is not `token/token` followed by `;`-separated parameters.
    package init?(_ text: String) {
        let parts = text.split(separator: ";", omittingEmptySubsequences: false).map { String($0).trimming() }
        let essence = parts[0].lowercased()
        let halves = essence.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, halves.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(Self.isTokenByte) }) else { return nil }
        var parameters: [String: String] = [:]
        for parameter in parts.dropFirst() where !parameter.isEmpty {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { return nil }
            var value = String(pair[1]).trimming()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            parameters[String(pair[0]).trimming().lowercased()] = value
        }
        self.essence = essence
        self.parameters = parameters
    }

    /// `application/json`, exactly.
    package var isJSON: Bool { essence == "application/json" }

    /// No `charset`, or UTF-8 (the only one GraphQL over HTTP allows).
    package var isUTF8: Bool {
        guard let charset = parameters["charset"]?.lowercased() else { return true }
        return charset == "utf-8" || charset == "utf8"
    }

    /// The media ranges of an `Accept` header (or of several joined with commas) that parse
    /// and are not refused with `q=0`.
    package static func list(_ header: String) -> [MediaType] {
        header.split(separator: ",").compactMap { MediaType(String($0)) }.filter { $0.parameters["q"].flatMap(Double.init) != 0 }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "-"), UInt8(ascii: "^"),
            UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "+"), UInt8(ascii: "*"):
            true
        default: false
        }
    }
}
