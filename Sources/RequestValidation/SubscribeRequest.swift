import GQLMuxVocabulary
import JSONEnvelope
import LocalProtocol
import NIOCore

/// A validated local `subscribe` payload: its operation type, its dedup key, and the
/// original bytes to forward upstream.
package struct SubscribeRequest {
    /// What goes upstream: the client's payload, without `extensions.gqlmux`.
    package var payload: ByteBuffer
    package var kind: OperationKind
    /// Document (its tokens, so whitespace, commas and comments do not matter),
    /// operationName, canonical variables and extensions (without `gqlmux`).
    package var dedupKey: String
    /// What operators see it called (`gqlmuxctl operations`): its operation's name, else its
    /// first selection's field; never a variable's value.
    package var label = ""
    /// What the client asked of gqlmuxd itself (`extensions.gqlmux`); never sent upstream.
    package var options = Options()
    /// `extensions.gqlmux.resnapshot` as it goes upstream at each resume of the stream: the
    /// query, with the subscription's variables.
    package var snapshotPayload: ByteBuffer?
    /// The upstream it is for, by name (nil: `default`): the line protocol's top-level
    /// `upstream`, the endpoint's path. Not part of the payload.
    package var upstream: String?

    /// `extensions.gqlmux`: per-operation requests to gqlmuxd.
    package struct Options: Sendable, Equatable {
        /// `replayLast`: receive the shared subscription's latest result at once when joining
        /// (nil: the daemon's `[subscriptions] replay_last`).
        package var replayLast: Bool?
        /// `resnapshot`: a query document to run at each resume of the shared stream; its
        /// result comes first, marked as a snapshot.
        package var resnapshot: String?

        package init(replayLast: Bool? = nil, resnapshot: String? = nil) {
            self.replayLast = replayLast
            self.resnapshot = resnapshot
        }
    }

    package struct Invalid: Error {
        package var code: LocalErrorCode
        package var message: String
    }

    /// Bounds checked before the recursive GraphQL parser runs (`[limits] max_document_tokens`
    /// and `max_document_depth`).
    package struct Limits: Sendable, Equatable {
        package var maxTokens: Int
        package var maxDepth: Int
        package init(maxTokens: Int = Self.defaultMaxTokens, maxDepth: Int = Self.defaultMaxDepth) {
            self.maxTokens = maxTokens
            self.maxDepth = maxDepth
        }
        /// Apollo Router's default; parsing and printing 15,000 tokens costs a few ms (`scripts/parse-probe.sh` measures it).
        package static let defaultMaxTokens = 15_000
        /// The syntax check (``ExecutableDocument``) uses about 1.75 KiB of stack per nesting
        /// level in a debug build (295 levels survive a 512 KiB thread stack, 599 a 1 MiB one:
        /// scripts/parse-probe.sh), so an 8 MiB event loop thread holds about 4,700. The
        /// default keeps a wide margin.
        package static let defaultMaxDepth = 128
        /// Highest value the configuration accepts: 512 levels use about 0.9 MiB, a 9x margin.
        package static let maxAllowedDepth = 512
    }

    /// - Parameters:
    ///   - payload: the `payload` object of a local `subscribe` line.
    ///   - limits: document bounds checked before parsing.
    package static func parse(_ payload: ByteBuffer, limits: Limits = Limits()) throws(Invalid) -> SubscribeRequest {
        var query: String?
        var operationName: String?
        var variables = "null"
        var extensions = "null"
        var options = Options()
        var rawVariables: String?
        /// The payload as it goes upstream: rebuilt only when it carried `extensions.gqlmux`
        /// (taken out) or members other than the four a GraphQL request has (left out: what is
        /// forwarded is what is keyed, so two requests that differ there never share).
        var forwarded = payload
        var upstreamExtensions: String?
        var foreign = false
        let members: [JSONMember]
        do {
            members = try payload.withUnsafeReadableBytes { bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }
        } catch {
            throw Invalid(code: LocalErrorCode.badRequest, message: "subscribe payload must be a JSON object")
        }
        let raw = { (member: JSONMember) in
            payload.getString(at: payload.readerIndex + member.range.lowerBound, length: member.range.count) ?? ""
        }
        var seen: Set<String> = []
        for member in members {
            // One of each: with two, what is keyed (the last) and what a server reads (perhaps
            // the first) could differ.
            if ["query", "operationName", "variables", "extensions"].contains(member.key), !seen.insert(member.key).inserted {
                throw Invalid(code: LocalErrorCode.badRequest, message: "subscribe payload has '\(member.key)' more than once")
            }
            switch (member.key, member.kind) {
            case ("query", .string):
                query = payload.withUnsafeReadableBytes { JSONScanner.decodeString($0, member.range) }
            case ("operationName", .string):
                operationName = payload.withUnsafeReadableBytes { JSONScanner.decodeString($0, member.range) }
            case ("operationName", .null):
                break
            case ("variables", .object), ("variables", .null):
                variables = canonicalJSON(raw(member))
                if member.kind == .object { rawVariables = raw(member) }
            case ("extensions", .object):
                let own = try Self.ownExtensions(raw(member))
                options = own.options
                extensions = own.canonical
                upstreamExtensions = own.upstream
            case ("extensions", .null):
                extensions = canonicalJSON(raw(member))
            case ("query", _), ("operationName", _), ("variables", _), ("extensions", _):
                throw Invalid(code: LocalErrorCode.badRequest, message: "subscribe payload field '\(member.key)' has the wrong type")
            default:
                foreign = true
            }
        }
        if upstreamExtensions != nil || foreign {
            forwarded = Self.requestMembers(of: payload, members: members, extensions: upstreamExtensions)
        }
        guard let query else { throw Invalid(code: LocalErrorCode.badRequest, message: "subscribe payload needs a string 'query'") }
        var tokenText: [UInt8]? = []
        let operations = try Self.operations(of: query, limits: limits, tokenText: &tokenText)
        let selected: ExecutableDocument.Operation
        if let operationName {
            guard let match = operations.first(where: { $0.name == operationName }) else {
                throw Invalid(code: LocalErrorCode.invalidDocument, message: "no operation named '\(operationName)' in the document")
            }
            selected = match
        } else {
            guard operations.count == 1 else {
                throw Invalid(
                    code: LocalErrorCode.invalidDocument,
                    message: operations.isEmpty ? "the document has no operation" : "the document has several operations: set operationName"
                )
            }
            selected = operations[0]
        }
        let kind = selected.kind
        let key = [String(decoding: tokenText ?? [], as: UTF8.self), operationName ?? "", variables, extensions].joined(separator: "\u{0}")
        var snapshotPayload: ByteBuffer?
        if let resnapshot = options.resnapshot {
            guard kind == .subscription else {
                throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux.resnapshot applies to subscriptions only")
            }
            try checkSnapshot(resnapshot, limits: limits)
            var snapshot = ByteBuffer()
            snapshot.writeStaticString(#"{"query":"#)
            snapshot.writeJSONString(resnapshot)
            if let rawVariables {
                snapshot.writeStaticString(#","variables":"#)
                snapshot.writeString(rawVariables)
            }
            snapshot.writeStaticString("}")
            snapshotPayload = snapshot
        }
        var request = SubscribeRequest(payload: forwarded, kind: kind, dedupKey: key, options: options, snapshotPayload: snapshotPayload)
        request.label = String((selected.name ?? OperationLabel.firstSelection(of: query) ?? "\(kind)").prefix(64))
        return request
    }

    /// A document's operations: bounded first (`max_document_tokens`, `max_document_depth`),
    /// then parsed. `context` names where the document was (nil: the `query`) in the errors.
    private static func operations(
        of query: String,
        limits: Limits,
        tokenText: inout [UInt8]?,
        context: String? = nil
    ) throws(Invalid) -> [ExecutableDocument.Operation] {
        let prefix = context.map { "\($0): " } ?? ""
        do {
            _ = try DocumentBounds.check(query, maxTokens: limits.maxTokens, maxDepth: limits.maxDepth, tokenText: &tokenText)
        } catch {
            switch error {
            case .tokens(let limit):
                throw Invalid(code: LocalErrorCode.limitExceeded, message: prefix + "document has more than max_document_tokens (\(limit)) tokens")
            case .depth(let limit):
                throw Invalid(code: LocalErrorCode.limitExceeded, message: prefix + "document nests deeper than max_document_depth (\(limit))")
            }
        }
        do {
            return try ExecutableDocument.parse(query).operations
        } catch {
            throw Invalid(code: LocalErrorCode.invalidDocument, message: prefix + error.description)
        }
    }

    /// A snapshot query is held to the same bounds and syntax check as any document, and must
    /// be one query (a mutation at every resume would be a disaster).
    private static func checkSnapshot(_ query: String, limits: Limits) throws(Invalid) {
        var noTokens: [UInt8]? = nil
        let operations = try operations(of: query, limits: limits, tokenText: &noTokens, context: "extensions.gqlmux.resnapshot")
        guard operations.count == 1, operations[0].kind == .query else {
            throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux.resnapshot must hold exactly one query operation")
        }
    }

    /// Reads `extensions.gqlmux` out of an `extensions` object: the options, the canonical
    /// text of the rest (for the dedup key), and, when `gqlmux` was there, the rest as it goes
    /// upstream (nil: send the object as it is; an empty text: drop `extensions`).
    private static func ownExtensions(_ raw: String) throws(Invalid) -> (options: Options, canonical: String, upstream: String?) {
        guard case .object(let members)? = JSONValue.parse(raw), let own = members.first(where: { $0.key == "gqlmux" }) else {
            return (Options(), canonicalJSON(raw), nil)
        }
        guard case .object(let settings) = own.value else {
            throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux must be an object")
        }
        var options = Options()
        for setting in settings {
            switch (setting.key, setting.value) {
            case ("replayLast", .bool(let value)): options.replayLast = value
            case ("replayLast", _): throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux.replayLast must be true or false")
            case ("resnapshot", .string(let query)): options.resnapshot = query
            case ("resnapshot", _): throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux.resnapshot must be a query document (a string)")
            default:
                throw Invalid(code: LocalErrorCode.badRequest, message: "extensions.gqlmux has no option '\(setting.key)' (replayLast, resnapshot)")
            }
        }
        let rest = members.filter { $0.key != "gqlmux" }
        let value = JSONValue.object(rest)
        return (options, rest.isEmpty ? "null" : value.sortingKeys.text, rest.isEmpty ? "" : value.text)
    }

    /// The payload object with member `name` replaced by `json` (raw JSON text), or dropped when
    /// `json` is empty; the other members' bytes as they came.
    /// `payload` with only the members a GraphQL request has (`query`, `operationName`,
    /// `variables`, `extensions`), `extensions` replaced by `extensions` when given (left out
    /// when that is empty).
    private static func requestMembers(of payload: ByteBuffer, members: [JSONMember], extensions json: String?) -> ByteBuffer {
        var out = ByteBuffer()
        out.reserveCapacity(payload.readableBytes)
        out.writeStaticString("{")
        var first = true
        for member in members where ["query", "operationName", "variables", "extensions"].contains(member.key) {
            let value: String
            if member.key == "extensions", let json {
                guard !json.isEmpty else { continue }
                value = json
            } else {
                value = payload.getString(at: payload.readerIndex + member.range.lowerBound, length: member.range.count) ?? "null"
            }
            if !first { out.writeStaticString(",") }
            first = false
            out.writeJSONString(member.key)
            out.writeStaticString(":")
            out.writeString(value)
        }
        out.writeStaticString("}")
        return out
    }

    /// The JSON text with sorted keys and no white space, so `{"a":1,"b":2}` and
    /// `{ "b": 2, "a": 1 }` match; unreadable text is kept as it is.
    package static func canonicalJSON(_ raw: String) -> String {
        JSONValue.parse(raw)?.sortingKeys.text ?? raw
    }
}
