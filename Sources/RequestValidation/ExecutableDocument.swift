import GQLMuxVocabulary

/// What gqlmuxd needs to know of a request's GraphQL document: that it is syntactically an
/// executable document (operations and fragments, the specification's October 2021 grammar),
/// and each operation's type and name. Checking fields, types and variables against a
/// schema is the server's part.
///
/// The parser is recursive descent; run it on documents that passed ``DocumentBounds`` (the
/// nesting is bounded first, so the recursion is too).
package struct ExecutableDocument: Sendable, Equatable {
    package struct Operation: Sendable, Equatable {
        package var kind: OperationKind
        /// Nil for an anonymous operation (and the `{ … }` shorthand, a query).
        package var name: String?

        package init(kind: OperationKind, name: String?) {
            self.kind = kind
            self.name = name
        }
    }

    package var operations: [Operation]

    /// Parses `document`.
    /// - Throws: ``GraphQLSyntaxError`` at the first token that does not fit the grammar; type
    ///   system definitions (`type`, `schema`, `extend` …) are not part of a request.
    package static func parse(_ document: String) throws(GraphQLSyntaxError) -> ExecutableDocument {
        var text = document
        let result = text.withUTF8 { bytes -> Result<ExecutableDocument, GraphQLSyntaxError> in
            do throws(GraphQLSyntaxError) {
                var parser = try Parser(GraphQLLexer(bytes))
                return .success(ExecutableDocument(operations: try parser.document()))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

/// The syntactic grammar over ``GraphQLLexer``'s tokens, one token of lookahead.
private struct Parser {
    var lexer: GraphQLLexer
    var token: GraphQLToken

    init(_ lexer: GraphQLLexer) throws(GraphQLSyntaxError) {
        self.lexer = lexer
        self.token = GraphQLToken(kind: .end, start: 0, end: 0)
        self.token = try self.lexer.next()
    }

    // MARK: Tokens

    mutating func advance() throws(GraphQLSyntaxError) { token = try lexer.next() }

    func peek(_ punctuator: UInt8) -> Bool { token.kind == .punctuator(punctuator) }

    /// Consumes `punctuator` if it is next.
    mutating func skip(_ punctuator: UInt8) throws(GraphQLSyntaxError) -> Bool {
        guard peek(punctuator) else { return false }
        try advance()
        return true
    }

    mutating func expect(_ punctuator: UInt8) throws(GraphQLSyntaxError) {
        guard peek(punctuator) else { throw unexpected(expected: "\"\(Character(Unicode.Scalar(punctuator)))\"") }
        try advance()
    }

    /// Consumes a name; its token (for its text).
    @discardableResult
    mutating func name() throws(GraphQLSyntaxError) -> GraphQLToken {
        guard token.kind == .name else { throw unexpected(expected: "Name") }
        let name = token
        try advance()
        return name
    }

    mutating func keyword(_ word: StaticString) throws(GraphQLSyntaxError) {
        guard lexer.isName(token, word) else { throw unexpected(expected: "\"\(word)\"") }
        try advance()
    }

    func unexpected(expected: String? = nil) -> GraphQLSyntaxError {
        let found: String =
            switch token.kind {
            case .end: "<EOF>"
            case .punctuator, .spread: "\"\(lexer.text(token))\""
            case .name: "Name \"\(lexer.text(token))\""
            case .int: "Int \"\(lexer.text(token))\""
            case .float: "Float \"\(lexer.text(token))\""
            case .string, .blockString: "String"
            }
        return lexer.error(expected.map { "Expected \($0), found \(found)." } ?? "Unexpected \(found).", at: token.start)
    }

    // MARK: Definitions

    mutating func document() throws(GraphQLSyntaxError) -> [ExecutableDocument.Operation] {
        var operations: [ExecutableDocument.Operation] = []
        repeat {
            if let operation = try definition() { operations.append(operation) }
        } while token.kind != .end
        return operations
    }

    /// An operation (returned) or a fragment definition (nil).
    mutating func definition() throws(GraphQLSyntaxError) -> ExecutableDocument.Operation? {
        if peek(0x7B) {
            try selectionSet()
            return ExecutableDocument.Operation(kind: .query, name: nil)
        }
        guard token.kind == .name else {
            if token.kind == .string || token.kind == .blockString {
                throw lexer.error("Unexpected description: a request holds operations and fragments only.", at: token.start)
            }
            throw unexpected()
        }
        let kind: OperationKind
        if lexer.isName(token, "query") {
            kind = .query
        } else if lexer.isName(token, "mutation") {
            kind = .mutation
        } else if lexer.isName(token, "subscription") {
            kind = .subscription
        } else if lexer.isName(token, "fragment") {
            try fragmentDefinition()
            return nil
        } else {
            throw lexer.error(
                "Unexpected Name \"\(lexer.text(token))\": a request holds operations and fragments only.",
                at: token.start
            )
        }
        try advance()
        var name: String?
        if token.kind == .name { name = lexer.text(try self.name()) }
        if peek(0x28) { try variableDefinitions() }
        try directives(const: false)
        try selectionSet()
        return ExecutableDocument.Operation(kind: kind, name: name)
    }

    mutating func fragmentDefinition() throws(GraphQLSyntaxError) {
        try keyword("fragment")
        try fragmentName()
        try keyword("on")
        try name()
        try directives(const: false)
        try selectionSet()
    }

    mutating func fragmentName() throws(GraphQLSyntaxError) {
        if lexer.isName(token, "on") { throw unexpected() }
        try name()
    }

    mutating func variableDefinitions() throws(GraphQLSyntaxError) {
        try expect(0x28)
        repeat {
            try variable()
            try expect(0x3A)
            try type()
            if try skip(0x3D) { try value(const: true) }
            try directives(const: true)
        } while !peek(0x29)
        try advance()
    }

    mutating func variable() throws(GraphQLSyntaxError) {
        try expect(0x24)
        try name()
    }

    /// `Name`, `[Type]`, either followed by `!`.
    mutating func type() throws(GraphQLSyntaxError) {
        if try skip(0x5B) {
            try type()
            try expect(0x5D)
        } else {
            try name()
        }
        _ = try skip(0x21)
    }

    mutating func directives(const: Bool) throws(GraphQLSyntaxError) {
        while try skip(0x40) {
            try name()
            if peek(0x28) { try arguments(const: const) }
        }
    }

    // MARK: Selections

    mutating func selectionSet() throws(GraphQLSyntaxError) {
        try expect(0x7B)
        repeat {
            try selection()
        } while !peek(0x7D)
        try advance()
    }

    mutating func selection() throws(GraphQLSyntaxError) {
        if token.kind == .spread {
            try advance()
            if token.kind == .name, !lexer.isName(token, "on") {
                try name()  // a fragment spread
                try directives(const: false)
                return
            }
            if lexer.isName(token, "on") {
                try advance()
                try name()
            }
            try directives(const: false)
            try selectionSet()
            return
        }
        try name()
        if try skip(0x3A) { try name() }  // that was the alias
        if peek(0x28) { try arguments(const: false) }
        try directives(const: false)
        if peek(0x7B) { try selectionSet() }
    }

    mutating func arguments(const: Bool) throws(GraphQLSyntaxError) {
        try expect(0x28)
        repeat {
            try name()
            try expect(0x3A)
            try value(const: const)
        } while !peek(0x29)
        try advance()
    }

    // MARK: Values

    mutating func value(const: Bool) throws(GraphQLSyntaxError) {
        switch token.kind {
        case .punctuator(0x24) where !const:
            try variable()
        case .int, .float, .string, .blockString, .name:
            try advance()  // true, false, null and enum values are names
        case .punctuator(0x5B):
            try advance()
            while !peek(0x5D) { try value(const: const) }
            try advance()
        case .punctuator(0x7B):
            try advance()
            while !peek(0x7D) {
                try name()
                try expect(0x3A)
                try value(const: const)
            }
            try advance()
        default:
            throw unexpected()
        }
    }
}
