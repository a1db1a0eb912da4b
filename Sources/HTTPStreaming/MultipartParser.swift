import NIOCore

/// One step of a `multipart/mixed` body.
package enum MultipartEvent: Equatable, Sendable {
    /// A part's body (its headers removed), as soon as the delimiter after it has arrived.
    case part(ByteBuffer)
    /// The close delimiter `--boundary--`: the server ended the stream.
    case end
}

/// A pure, incremental reader of a `multipart/mixed` response body (RFC 2046, as GraphQL
/// incremental delivery and Apollo's subscription spec use it): bytes in, parts out, however
/// the bytes are split into reads.
///
/// The delimiter is CRLF `--boundary`. JSON text cannot hold a raw CR or LF, so the delimiter
/// never matches inside a part. The first delimiter may come without its CRLF (strawberry) or
/// after a preamble. A part may carry headers (`Content-Type`, `Content-Length`), which are
/// skipped; a part whose first byte is `{` has none. A part is given out when the delimiter
/// after it arrives, never held until the part after that.
package struct MultipartParser: Sendable {
    private enum State: Sendable {
        /// Before the first delimiter: bytes are preamble.
        case preamble
        /// Just after a delimiter: `--` ends the stream, anything else is padding up to CRLF.
        case afterDelimiter
        /// Inside a part that started at `partStart`.
        case inPart
        case ended
    }

    private let delimiter: [UInt8]
    private let maxPartBytes: Int
    private var buffer: [UInt8] = [13, 10]  // the first delimiter's CRLF may be missing
    private var state = State.preamble
    /// Where the current part (or preamble) starts in `buffer`.
    private var partStart = 0
    /// Where the delimiter search resumes: bytes before it were searched already.
    private var searchFrom = 0

    /// - Parameters:
    ///   - boundary: the `boundary` parameter of the response's Content-Type.
    ///   - maxPartBytes: a longer part fails the stream (`max_message_bytes`).
    package init(boundary: String, maxPartBytes: Int) {
        self.delimiter = [13, 10, UInt8(ascii: "-"), UInt8(ascii: "-")] + Array(boundary.utf8)
        self.maxPartBytes = maxPartBytes
    }

    /// Whether the close delimiter has been read.
    package var isEnded: Bool {
        if case .ended = state { return true }
        return false
    }

    /// Reads `bytes` and returns every event they complete.
    package mutating func feed(_ bytes: ByteBuffer) throws(StreamParseError) -> [MultipartEvent] {
        guard !isEnded else { return [] }
        buffer.append(contentsOf: bytes.readableBytesView)
        var events: [MultipartEvent] = []
        loop: while true {
            switch state {
            case .preamble, .inPart:
                guard let found = find(delimiter, from: searchFrom) else {
                    searchFrom = max(searchFrom, buffer.count - delimiter.count + 1)
                    if buffer.count - partStart > maxPartBytes + 1024 {
                        throw StreamParseError("a multipart part is larger than max_message_bytes (\(maxPartBytes))")
                    }
                    break loop
                }
                switch state {
                case .inPart where found >= partStart:
                    events.append(.part(try body(of: buffer[partStart..<found])))
                case .preamble:
                    // strawberry sends no opening delimiter: its first part is the "preamble".
                    if let part = try firstPart(buffer[min(2, found)..<found]) { events.append(.part(part)) }
                default:
                    break  // an empty part: the close delimiter right after a delimiter line
                }
                state = .afterDelimiter
                partStart = found + delimiter.count
                searchFrom = partStart
            case .afterDelimiter:
                let rest = buffer.count - partStart
                if rest >= 2, buffer[partStart] == UInt8(ascii: "-"), buffer[partStart + 1] == UInt8(ascii: "-") {
                    state = .ended
                    events.append(.end)
                    buffer = []
                    break loop
                }
                guard let lineEnd = find([13, 10], from: partStart) else {
                    if rest > 1024 { throw StreamParseError("no line end after a multipart delimiter") }
                    break loop
                }
                state = .inPart
                partStart = lineEnd + 2
                searchFrom = lineEnd  // the CRLF just read may begin the next delimiter (an empty part)
            case .ended:
                break loop
            }
        }
        compact()
        return events
    }

    /// Bytes before the first delimiter: a part when, after an optional line end and headers,
    /// they hold a JSON object (strawberry's first heartbeat); otherwise a preamble, ignored.
    private func firstPart(_ preamble: ArraySlice<UInt8>) throws(StreamParseError) -> ByteBuffer? {
        var text = preamble
        while let first = text.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        if text.starts(with: [13, 10]) { text = text.dropFirst(2) }
        guard !text.isEmpty else { return nil }
        let body = try body(of: text)
        let first = body.readableBytesView.first { $0 != 0x20 && $0 != 0x09 && $0 != 13 && $0 != 10 }
        return first == UInt8(ascii: "{") ? body : nil
    }

    /// The body of one part: after its headers, if it has any.
    private func body(of part: ArraySlice<UInt8>) throws(StreamParseError) -> ByteBuffer {
        guard part.count <= maxPartBytes + 1024 else {
            throw StreamParseError("a multipart part is larger than max_message_bytes (\(maxPartBytes))")
        }
        var start = part.startIndex
        let firstNonSpace = part.firstIndex { $0 != 0x20 && $0 != 0x09 }
        if part.starts(with: [13, 10]) {
            start += 2  // no headers, an empty header section
        } else if let firstNonSpace, part[firstNonSpace] == UInt8(ascii: "{") {
            start = firstNonSpace  // no header section at all
        } else if let headersEnd = Self.find([13, 10, 13, 10], in: part, from: part.startIndex) {
            start = headersEnd + 4
        }
        let body = part[start...]
        guard body.count <= maxPartBytes else {
            throw StreamParseError("a multipart part is larger than max_message_bytes (\(maxPartBytes))")
        }
        return ByteBuffer(bytes: body)
    }

    private func find(_ needle: [UInt8], from start: Int) -> Int? {
        Self.find(needle, in: buffer[...], from: start)
    }

    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>, from start: Int) -> Int? {
        guard let first = needle.first, haystack.endIndex - start >= needle.count else { return nil }
        var index = start
        let last = haystack.endIndex - needle.count
        while index <= last {
            guard let hit = haystack[index...last].firstIndex(of: first) else { return nil }
            if haystack[hit..<hit + needle.count].elementsEqual(needle) { return hit }
            index = hit + 1
        }
        return nil
    }

    /// Drops the bytes before the current part so the buffer holds one part at most.
    private mutating func compact() {
        guard partStart > 4096, partStart > buffer.count / 2 else { return }
        buffer.removeSubrange(0..<partStart)
        searchFrom -= partStart
        partStart = 0
    }
}

extension MultipartParser {
    /// The `boundary` parameter of a `multipart/mixed` Content-Type, quoted or not
    /// (`multipart/mixed;boundary="graphql";subscriptionSpec=1.0`); nil when the type is not
    /// multipart/mixed or names no boundary.
    package static func boundary(contentType: String) -> String? {
        let parameters = contentType.split(separator: ";", omittingEmptySubsequences: false)
        guard let type = parameters.first, type.trimmingSpaces.lowercased() == "multipart/mixed" else { return nil }
        for parameter in parameters.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingSpaces.lowercased() == "boundary" else { continue }
            var value = pair[1].trimmingSpaces
            // strawberry appends ", application/json" to the type's last parameter.
            if !value.hasPrefix("\""), let comma = value.firstIndex(of: ",") { value = value[..<comma].trimmingSpaces }
            if value.hasPrefix("\""), let close = value.dropFirst().firstIndex(of: "\"") {
                value = value[value.index(after: value.startIndex)..<close]
            }
            return value.isEmpty ? nil : String(value)
        }
        return nil
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        let text = Substring(self)
        let start = text.firstIndex { $0 != " " && $0 != "\t" } ?? text.endIndex
        let end = text[start...].lastIndex { $0 != " " && $0 != "\t" }.map { text.index(after: $0) } ?? start
        return text[start..<end]
    }
}
