import NIOCore

/// One dispatched Server-Sent Event.
package struct SSEEvent: Equatable, Sendable {
    /// The `event:` field; "message" when the event named none.
    package var type: String
    /// The `data:` lines joined with LF.
    package var data: ByteBuffer
}

/// A pure, incremental reader of a `text/event-stream` body by the WHATWG rules: lines end
/// with CR, LF or CRLF (a CRLF split across reads counts once); `:` lines are comments (the
/// keep-alives); `data:` lines accumulate, joined with LF; an empty line dispatches the event;
/// one space after the colon is dropped; a leading BOM is skipped. Bytes in, events out,
/// however the bytes are split.
package struct SSEParser: Sendable {
    private let maxEventBytes: Int
    private var line: [UInt8] = []
    private var eventType = ""
    private var data: [UInt8] = []
    private var hasData = false
    /// The last byte read was a CR: an LF right after it ends no second line.
    private var afterCR = false
    private var atStart = true

    /// - Parameter maxEventBytes: an event (or a line) longer than this fails the stream.
    package init(maxEventBytes: Int) {
        self.maxEventBytes = maxEventBytes
    }

    package mutating func feed(_ bytes: ByteBuffer) throws(StreamParseError) -> [SSEEvent] {
        var events: [SSEEvent] = []
        let view = bytes.readableBytesView
        var index = view.startIndex
        guard index < view.endIndex else { return [] }
        if afterCR, view[index] == 10 { index += 1 }  // the LF of a CRLF split across reads
        afterCR = false
        while index < view.endIndex {
            guard let end = view[index...].firstIndex(where: { $0 == 10 || $0 == 13 }) else {
                try append(view[index...])
                break
            }
            try append(view[index..<end])
            try endLine(into: &events)
            index = end + 1
            if view[end] == 13 {
                if index == view.endIndex {
                    afterCR = true
                } else if view[index] == 10 {
                    index += 1
                }
            }
        }
        return events
    }

    private mutating func append(_ bytes: ByteBufferView.SubSequence) throws(StreamParseError) {
        line.append(contentsOf: bytes)
        if line.count + data.count > maxEventBytes {
            throw StreamParseError("an event-stream event is larger than max_message_bytes (\(maxEventBytes))")
        }
    }

    private mutating func endLine(into events: inout [SSEEvent]) throws(StreamParseError) {
        defer { line.removeAll(keepingCapacity: true) }
        if atStart {
            atStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        guard !line.isEmpty else {
            dispatch(into: &events)
            return
        }
        guard line[0] != UInt8(ascii: ":") else { return }  // a comment: a keep-alive
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = line[..<(colon ?? line.endIndex)]
        var value = colon.map { line[($0 + 1)...] } ?? []
        if value.first == 0x20 { value = value.dropFirst() }
        if name.elementsEqual(Self.dataField) {
            if hasData { data.append(10) }
            data.append(contentsOf: value)
            hasData = true
            return
        }
        switch String(decoding: name, as: UTF8.self) {
        case "event":
            guard let text = String(validating: value, as: UTF8.self) else {
                throw StreamParseError("an event-stream event name is not valid UTF-8")
            }
            eventType = text
        default:
            break  // id, retry and unknown fields: nothing to do for a stream that cannot resume
        }
    }

    private static let dataField = Array("data".utf8)

    private mutating func dispatch(into events: inout [SSEEvent]) {
        defer {
            eventType = ""
            data.removeAll(keepingCapacity: true)
            hasData = false
        }
        guard hasData || !eventType.isEmpty else { return }
        events.append(SSEEvent(type: eventType.isEmpty ? "message" : eventType, data: ByteBuffer(bytes: data)))
    }
}
