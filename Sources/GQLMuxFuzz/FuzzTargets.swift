import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPFields
import HTTPStreaming
import Handover
import JSONEnvelope
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOEmbedded
import RequestValidation

/// The bodies of the libFuzzer targets (Fuzz/*.swift, built by scripts/fuzz.sh) and of the
/// corpus replay test. Each feeds bytes to one input path of gqlmuxd exactly as the daemon
/// does and traps when an invariant breaks, so libFuzzer reports it as a crash.
public enum FuzzTargets {
    /// Local socket bytes: line framing, envelope, `subscribe` payload, document bounds, parse.
    /// Invariant: a line accepted as JSON is valid UTF-8 (nothing else may reach the upstream).
    public static func localLines(_ data: UnsafeRawBufferPointer) {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try! channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maxLineBytes: 4096)))
        var buffer = channel.allocator.buffer(capacity: data.count)
        buffer.writeBytes(data)
        do {
            try channel.writeInbound(buffer)
        } catch {
            return  // line too long: the daemon answers BAD_REQUEST and closes
        }
        while let line = try? channel.readInbound(as: ByteBuffer.self) {
            localLine(line)
        }
    }

    static func localLine(_ line: ByteBuffer) {
        // The line client's own path: its wire reads each line as a request.
        let read = ClientRequest(line: line, limits: SubscribeRequest.Limits(maxTokens: 2_000, maxDepth: 64))
        if case .invalid = read { return }
        precondition(line.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) } != nil, "accepted a line that is not UTF-8")
        // What a line client presents for its own identity goes upstream: a JSON object, and
        // headers that cannot smuggle another header in.
        if case .connectionInit(_, let presented?) = read {
            if let payload = presented.payload {
                precondition(payload.withUnsafeBytes { (try? JSONValue.parse($0))?.isObject } == true, "a presented payload that is not a JSON object")
            }
            for header in presented.headers {
                precondition(PresentedCredential.isValidHeader(name: header.name, value: header.value), "a presented header that is not one")
                precondition(!header.value.contains("\r") && !header.value.contains("\n"), "a presented header with a line break")
            }
            endpointTokenNeverLeaves(payload: presented.payload ?? [], headers: presented.headers.map(\.value))
        }
        guard case .subscribe(_, .success(let request)) = read else { return }
        // What goes upstream is a JSON object that no longer carries gqlmuxd's own options, and
        // a snapshot query's request is one too.
        let forwarded = request.payload.withUnsafeReadableBytes { try? JSONValue.parse($0) }
        guard case .object(let members)? = forwarded else { preconditionFailure("forwarded a payload that is not a JSON object") }
        if case .object(let extensions)? = members.first(where: { $0.key == "extensions" })?.value {
            precondition(!extensions.contains { $0.key == "gqlmux" }, "extensions.gqlmux went upstream")
        }
        if let snapshot = request.snapshotPayload {
            precondition(snapshot.withUnsafeReadableBytes { (try? JSONValue.parse($0))?.isObject } == true, "a snapshot request that is not a JSON object")
        }
        // A mark on a result keeps it valid JSON.
        let marked = ResultMarks.marked(request.payload, "replayed")
        precondition(marked.withUnsafeReadableBytes { (try? JSONValue.parse($0))?.isObject } == true, "a marked result that is not a JSON object")
    }

    /// A handover record as the next gqlmuxd reads it from the file descriptor store: the bytes
    /// as they are, then as a body under a valid header (so the fuzzer reaches the parser behind
    /// the checksum, which it could rarely forge). Invariant: anything is refused or read whole;
    /// a record read back encodes to bytes that read back to the same record.
    public static func handover(_ data: UnsafeRawBufferPointer) {
        let body = Array(data)
        for record in [body, HandoverState.record(body: body)] {
            guard let state = try? HandoverState(decoding: record) else { continue }
            precondition((try? HandoverState(decoding: state.encoded())) == state, "a handover record does not survive its own round trip")
        }
    }

    /// One upstream text frame, given to a connected transport state machine with one
    /// subscription, once per protocol (graphql-transport-ws, the legacy graphql-ws, and AWS
    /// AppSync's dialect of it). Invariant: a `next` payload forwarded to clients is valid
    /// UTF-8, and an upstream `error` payload is a JSON array (the local protocol's shape, also
    /// after a legacy object is wrapped or AppSync's `errors` taken out of its object).
    public static func upstreamMessage(_ data: UnsafeRawBufferPointer) {
        for wire in WireProtocol.allCases {
            upstreamMessage(data, wire: wire)
        }
        upstreamMessage(data, wire: .legacyWS, dialect: .appSync)
        appSyncAcknowledgement(data)
    }

    /// The same bytes as AppSync's first answer (its `connection_ack`, whose
    /// `connectionTimeoutMs` sets the limit of silence), then a day on the clock: nothing traps
    /// and no deadline wraps.
    static func appSyncAcknowledgement(_ data: UnsafeRawBufferPointer) {
        var options = TransportOptions()
        options.dialect = .appSync
        var machine = TransportStateMachine(options: options, random: { 0.5 }, makeUUID: { "u" })
        let now = Instant(nanoseconds: 0)
        _ = machine.start(now: now)
        _ = machine.subscribe(id: OperationID(1), kind: .subscription, payload: ByteBuffer(string: #"{"query":"subscription { tick }"}"#), now: now)
        _ = machine.connectionOpened(generation: 1, initPayload: nil, protocol: .legacyWS, now: now)
        var frame = ByteBuffer()
        frame.writeBytes(data)
        _ = machine.received(generation: 1, frame, now: now)
        if let deadline = machine.nextDeadline { precondition(deadline >= now, "a deadline before the event that set it") }
        _ = machine.tick(now: now + .seconds(86_400))
    }

    static func upstreamMessage(_ data: UnsafeRawBufferPointer, wire: WireProtocol, dialect: UpstreamDialect = .standard) {
        var options = TransportOptions()
        options.dialect = dialect
        var machine = TransportStateMachine(options: options, random: { 0.5 }, makeUUID: { "u" })
        let now = Instant(nanoseconds: 0)
        _ = machine.start(now: now)
        var authorizer: AppSyncAuthorizer?
        if dialect == .appSync { authorizer = { _ in ByteBuffer(string: #"{"host":"h","x-api-key":"k"}"#) } }
        _ = machine.connectionOpened(generation: 1, initPayload: nil, protocol: wire, authorizer: authorizer, now: now)
        _ = machine.received(generation: 1, ByteBuffer(string: #"{"type":"connection_ack"}"#), now: now)
        _ = machine.subscribe(id: OperationID(1), kind: .subscription, payload: ByteBuffer(string: #"{"query":"subscription { tick }"}"#), now: now)
        var frame = ByteBuffer()
        frame.writeBytes(data)
        for action in machine.received(generation: 1, frame, now: now) {
            switch action {
            case .operation(_, .next(let payload)):
                precondition(payload.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) } != nil, "forwarded a payload that is not UTF-8")
            case .operation(_, .finished(.error(.upstream(let payload)))):
                precondition(payload.readableBytesView.first == UInt8(ascii: "["), "an upstream error payload that is not an array")
                precondition(payload.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) } != nil, "an error payload that is not UTF-8")
            default:
                continue
            }
        }
    }
}

extension FuzzTargets {
    /// Bytes of an HTTP streaming response, read as multipart (boundary `graphql`) and as SSE,
    /// whole and in chunks of a size taken from the first byte. Invariants: the split changes
    /// nothing (same events, or both fail), and every result handed on is valid UTF-8 JSON.
    public static func httpStreams(_ data: UnsafeRawBufferPointer) {
        guard let first = data.first else { return }
        let chunk = Int(first % 32) + 1
        let bytes = Array(data.dropFirst())
        let multipart = { (cuts: Int) throws(StreamParseError) -> [MultipartEvent] in
            var parser = MultipartParser(boundary: "graphql", maxPartBytes: 4096)
            var events: [MultipartEvent] = []
            for start in stride(from: 0, to: max(bytes.count, 1), by: cuts) {
                events += try parser.feed(ByteBuffer(bytes: bytes[start..<min(start + cuts, bytes.count)]))
            }
            return events
        }
        let whole = try? multipart(bytes.count + 1)
        let split = try? multipart(chunk)
        if let whole, let split { precondition(whole == split, "multipart events depend on how the bytes are split") }
        for case .part(let part) in whole ?? [] { checkResult(try? StreamMessage.multipart(part)) }

        let sse = { (cuts: Int) throws(StreamParseError) -> [SSEEvent] in
            var parser = SSEParser(maxEventBytes: 4096)
            var events: [SSEEvent] = []
            for start in stride(from: 0, to: max(bytes.count, 1), by: cuts) {
                events += try parser.feed(ByteBuffer(bytes: bytes[start..<min(start + cuts, bytes.count)]))
            }
            return events
        }
        let wholeSSE = try? sse(bytes.count + 1)
        let splitSSE = try? sse(chunk)
        if let wholeSSE, let splitSSE { precondition(wholeSSE == splitSSE, "SSE events depend on how the bytes are split") }
        for event in wholeSSE ?? [] { checkResult(try? StreamMessage.sse(event)) }

        // The same bytes as a proxy's answer to CONNECT: split or whole, the same outcome, and
        // the bytes after an accepting head are handed on untouched.
        let proxy = { (cuts: Int) -> ProxyAnswer.Outcome in
            var answer = ProxyAnswer()
            for start in stride(from: 0, to: max(bytes.count, 1), by: cuts) {
                let outcome = answer.feed(ByteBuffer(bytes: bytes[start..<min(start + cuts, bytes.count)]))
                guard outcome == .incomplete else {
                    guard case .open(var rest) = outcome else { return outcome }
                    rest.writeBytes(bytes[min(start + cuts, bytes.count)...])
                    return .open(rest: rest)
                }
            }
            return .incomplete
        }
        let wholeProxy = proxy(bytes.count + 1)
        precondition(wholeProxy == proxy(chunk), "a proxy's answer depends on how the bytes are split")
        if case .open(let rest) = wholeProxy { precondition(bytes.suffix(rest.readableBytes).elementsEqual(rest.readableBytesView)) }
    }

    private static func checkResult(_ message: StreamMessage?) {
        switch message {
        case .result(let payload)?, .fatal(let payload)?:
            precondition(payload.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) } != nil, "a stream result that is not UTF-8")
            precondition(payload.withUnsafeReadableBytes { (try? JSONScanner.validate($0)) != nil }, "a stream result that is not JSON")
        default:
            break
        }
    }
}

extension FuzzTargets {
    /// Bytes at the local GraphQL endpoint: as WebSocket text frames (split at NUL bytes) to a
    /// server session of each subprotocol, and as an HTTP request (the first line is the method
    /// and target, the rest the body); the session's messages back carry the bytes as payloads
    /// and errors. Invariants: only a `subscribe` with an object payload and a `complete` reach
    /// the daemon; every frame sent to the client is valid JSON whenever the payloads are; a
    /// close reason fits a close frame (123 bytes).
    public static func endpoint(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        let frames = bytes.split(separator: 0, omittingEmptySubsequences: false)
        for wire in WireProtocol.allCases {
            var session = WebSocketServerSession(wire: wire)
            var actions = session.received(ByteBuffer(string: #"{"type":"connection_init"}"#))
            for frame in frames { actions += session.received(ByteBuffer(bytes: frame)) }
            for message in sessionMessages(bytes) { _ = session.deliver(message) }
            if let presented = session.initPayload { endpointTokenNeverLeaves(payload: Array(presented.readableBytesView), headers: []) }
            for frame in frames { endpointTokenNeverLeaves(payload: Array(frame), headers: [String(decoding: frame, as: UTF8.self)]) }
            for action in actions {
                switch action {
                case .subscribe(_, let payload):
                    precondition(payload.withUnsafeReadableBytes { (try? JSONScanner.validate($0)) == .object }, "subscribed without an object")
                case .complete:
                    break
                case .send(let text):
                    precondition(text.withUnsafeReadableBytes { (try? JSONScanner.validate($0)) != nil }, "sent a frame that is not JSON")
                case .close(_, let reason):
                    precondition(reason.utf8.count <= 123, "a close reason too long for a close frame")
                }
            }
        }
        let head = frames.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let parts = head.split(separator: " ", maxSplits: 1).map(String.init)
        let target = (parts.count > 1 ? parts[1] : "").split(separator: "?", maxSplits: 1)
        let start = HTTPExchange.start(
            method: parts.first ?? "",
            accept: "text/event-stream",
            contentType: "application/json",
            body: ByteBuffer(bytes: bytes.dropFirst(head.utf8.count)),
            queryItems: target.count > 1 ? HTTPExchange.queryItems(target[1]) : [],
            id: "h1"
        ) { _ in .query }
        if case .subscribe(let request, var exchange) = start {
            precondition(request.withUnsafeReadableBytes { (try? JSONScanner.validate($0)) == .object }, "a request that is not a JSON object")
            _ = exchange.opening()
            for message in sessionMessages(bytes) { _ = exchange.deliver(message) }
        }
    }

    /// The session's messages with `bytes` as what the wire cannot check: a result's payload
    /// and an upstream's errors (the daemon passes both on untouched).
    private static func sessionMessages(_ bytes: [UInt8]) -> [SessionMessage] {
        let raw = ByteBuffer(bytes: bytes)
        return [
            .next(id: "h1", payload: raw, mark: .replayed),
            .error(id: "h1", .upstream(errors: raw)),
            .error(id: nil, .upstream(errors: raw)),
            .complete(id: "h1"),
        ]
    }
}

extension FuzzTargets {
    /// Bytes of an upstream connection after its upgrade, read as WebSocket frames: in one read,
    /// and in reads of a size taken from the first byte. Invariants: the cuts change nothing
    /// (the same messages, and the same failure or none), and no message is over the limit.
    public static func upstreamFrames(_ data: UnsafeRawBufferPointer) {
        guard let first = data.first else { return }
        let limit = 4_096
        var bytes = ByteBuffer()
        bytes.writeBytes(data)
        func read(cut: Int) -> (messages: [WebSocketMessageReader.Message], failure: WebSocketMessageReader.Failure?) {
            var reader = WebSocketMessageReader(maxMessageBytes: limit)
            var messages: [WebSocketMessageReader.Message] = []
            var from = 0
            do {
                while from < bytes.readableBytes {
                    let count = Swift.min(cut, bytes.readableBytes - from)
                    try reader.read(bytes.getSlice(at: from, length: count)!) { messages.append($0) }
                    from += count
                }
            } catch {
                return (messages, error)
            }
            return (messages, nil)
        }
        let whole = read(cut: bytes.readableBytes)
        let cut = read(cut: Int(first % 61) + 1)
        precondition(whole.messages == cut.messages && whole.failure == cut.failure, "cutting the bytes changed what was read")
        for case .text(let text) in whole.messages { precondition(text.readableBytes <= limit, "a message over the limit") }
    }
}
