import NIOCore

/// How operators see an operation named (`gqlmuxctl operations`): by its name when it has one,
/// else by the first field it selects; never by its variables' values.
package enum OperationLabel {
    /// The label of a request `payload` (`{"query": …, "operationName": …}`): its
    /// `operationName`, else the name of its one operation, else its first selection; nil when
    /// the payload has no query. At most 64 characters.
    package static func of(_ payload: ByteBuffer) -> String? {
        guard payload.readableBytes > 0, let request = try? SubscribeRequest.parse(payload) else { return nil }
        return request.label.isEmpty ? nil : request.label
    }

    /// The first field of the document's first selection set outside any parentheses (an
    /// alias gives way to its field; a fragment spread is `...Name`), or nil when there is none.
    package static func firstSelection(of query: String) -> String? {
        var query = query
        return query.withUTF8 { bytes -> String? in
            var lexer = GraphQLLexer(bytes)
            var parentheses = 0
            while let token = try? lexer.next(), token.kind != .end {
                switch token.kind {
                case .punctuator(0x28): parentheses += 1
                case .punctuator(0x29): parentheses -= 1
                case .punctuator(0x7B) where parentheses == 0:
                    guard let first = try? lexer.next() else { return nil }
                    if first.kind == .spread {
                        guard let name = try? lexer.next(), name.kind == .name else { return nil }
                        guard lexer.isName(name, "on") else { return "..." + lexer.text(name) }
                        guard let type = try? lexer.next(), type.kind == .name else { return nil }
                        return "... on " + lexer.text(type)
                    }
                    guard first.kind == .name else { return nil }
                    if let colon = try? lexer.next(), colon.kind == .punctuator(0x3A), let field = try? lexer.next(), field.kind == .name {
                        return lexer.text(field)
                    }
                    return lexer.text(first)
                default:
                    continue
                }
            }
            return nil
        }
    }
}
