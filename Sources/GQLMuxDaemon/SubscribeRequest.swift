import Foundation
import GraphQL
import GraphQLTransportWS
import NIOCore

/// A validated local `subscribe` payload: its operation type, its dedup key, and the
/// original bytes to forward upstream.
struct SubscribeRequest {
    var payload: ByteBuffer
    var kind: OperationKind
    /// Document (printed canonically, so whitespace and comments do not matter),
    /// operationName, canonical variables and extensions.
    var dedupKey: String

    struct Invalid: Error {
        var code: String
        var message: String
    }

    /// - Parameter payload: the `payload` object of a local `subscribe` line.
    static func parse(_ payload: ByteBuffer) throws(Invalid) -> SubscribeRequest {
        var query: String?
        var operationName: String?
        var variables = "null"
        var extensions = "null"
        let members: [JSONMember]
        do {
            members = try payload.withUnsafeReadableBytes { bytes throws(JSONScanError) in try JSONScanner.scanObject(bytes) }
        } catch {
            throw Invalid(code: ErrorCode.badRequest, message: "subscribe payload must be a JSON object")
        }
        let raw = { (member: JSONMember) in
            payload.getString(at: payload.readerIndex + member.range.lowerBound, length: member.range.count) ?? ""
        }
        for member in members {
            switch (member.key, member.kind) {
            case ("query", .string):
                query = payload.withUnsafeReadableBytes { JSONScanner.decodeString($0, member.range) }
            case ("operationName", .string):
                operationName = payload.withUnsafeReadableBytes { JSONScanner.decodeString($0, member.range) }
            case ("operationName", .null):
                break
            case ("variables", .object), ("variables", .null):
                variables = canonicalJSON(raw(member))
            case ("extensions", .object), ("extensions", .null):
                extensions = canonicalJSON(raw(member))
            case ("query", _), ("operationName", _), ("variables", _), ("extensions", _):
                throw Invalid(code: ErrorCode.badRequest, message: "subscribe payload field '\(member.key)' has the wrong type")
            default:
                continue
            }
        }
        guard let query else { throw Invalid(code: ErrorCode.badRequest, message: "subscribe payload needs a string 'query'") }
        let document: Document
        do {
            document = try GraphQL.parse(source: query, noLocation: true)
        } catch {
            throw Invalid(code: ErrorCode.invalidDocument, message: "\(error)".split(separator: "\n").first.map(String.init) ?? "syntax error")
        }
        let operations = document.definitions.compactMap { $0 as? OperationDefinition }
        let selected: OperationDefinition
        if let operationName {
            guard let match = operations.first(where: { $0.name?.value == operationName }) else {
                throw Invalid(code: ErrorCode.invalidDocument, message: "no operation named '\(operationName)' in the document")
            }
            selected = match
        } else {
            guard operations.count == 1 else {
                throw Invalid(
                    code: ErrorCode.invalidDocument,
                    message: operations.isEmpty ? "the document has no operation" : "the document has several operations: set operationName"
                )
            }
            selected = operations[0]
        }
        let kind: OperationKind =
            switch selected.operation {
            case .subscription: .subscription
            case .mutation: .mutation
            case .query: .query
            }
        let key = [GraphQL.print(ast: document), operationName ?? "", variables, extensions].joined(separator: "\u{0}")
        return SubscribeRequest(payload: payload, kind: kind, dedupKey: key)
    }

    /// Re-serialises JSON with sorted keys so `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` match.
    static func canonicalJSON(_ raw: String) -> String {
        guard let data = raw.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
            let canonical = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        else { return raw }
        return String(decoding: canonical, as: UTF8.self)
    }
}
