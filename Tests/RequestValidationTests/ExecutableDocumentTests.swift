import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQL
import GraphQLTransportWS
import LocalProtocol
import NIOCore
import RequestValidation
import Testing

/// gqlmuxd's own GraphQL syntax check: the grammar's corners, the errors' positions, and
/// agreement with GraphQLSwift's parser (a test-only dependency here) on many documents.
@Suite struct ExecutableDocumentTests {
    typealias Op = ExecutableDocument.Operation

    func operations(_ document: String) throws -> [Op] { try ExecutableDocument.parse(document).operations }

    func error(_ document: String) -> GraphQLSyntaxError? {
        do {
            _ = try ExecutableDocument.parse(document)
            return nil
        } catch {
            return error
        }
    }

    @Test func readsEveryExecutableConstruct() throws {
        #expect(try operations("{ a }") == [Op(kind: .query, name: nil)])
        #expect(try operations("\u{FEFF}query { a }") == [Op(kind: .query, name: nil)])
        #expect(
            try operations("subscription S { a }, mutation M { b } query Q { c }") == [
                Op(kind: .subscription, name: "S"), Op(kind: .mutation, name: "M"), Op(kind: .query, name: "Q"),
            ]
        )
        let everything = """
            # a comment { [ (
            query Q($id: ID! = "x", $list: [[Int!]]! = [[1, -2], [3.5e-2]], $o: In = {a: {b: [null, true, ENUM]}} @d(c: 1)) @dir(a: $id) {
              alias: field(arg: $id, s: "esc \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00 \\u{1F600}", b: \"\"\"block \\\"\"\" "" still\"\"\") @skip(if: false) {
                ...F @include(if: true)
                ... on T { x }
                ... @include(if: $id) { y }
                ... { z }
                on: on
                fragment: query
              }
            }
            fragment F on T @d { x(y: {}, z: []) }
            subscription { tick }
            """
        #expect(try operations(everything) == [Op(kind: .query, name: "Q"), Op(kind: .subscription, name: nil)])
        #expect(try operations("fragment F on T { a }") == [])
    }

    @Test func refusesWhatTheGrammarDoesNotAllow() {
        let refused = [
            "", "   # only a comment", "{ }", "{ a", "query { a } }", "query Q() { a }",
            "{ a(b:) }", "{ a() }", "{ a(b: $v) @d(c: ) }", "query ($v: Int = $w) { a }", "query ($v: Int @d(x: $y)) { a }",
            "{ ... }", "fragment on on T { a }", "fragment F T { a }", "{ a: }", "{ a. }", "{ a(b: 1a) }", "{ a(b: 1.) }",
            "{ a(b: 01) }", "{ a(b: 1e) }", "{ a(b: -) }", "{ a(b: .5) }", "{ a(b: \"x) }", "{ a(b: \"x\ny\") }",
            "{ a(b: \"\\q\") }", "{ a(b: \"\\u12\") }", "{ a(b: \"\\uD83D\") }", "{ a(b: \"\\uDE00\") }", "{ a(b: \"\\u{110000}\") }",
            "{ a(b: \"\"\"x) }", "{ a(b: \"\u{01}\") }", "{ a \u{07} }", "{ a ö }", "type T { a: Int }", "schema { query: Q }",
            "\"description\" query { a }", "extend type T { b: Int }", "query [Int] { a }", "{ a(b: [1, 2) }", "{ a(b: {c 1}) }",
        ]
        for document in refused {
            #expect(error(document) != nil, "accepted: \(document)")
        }
    }

    @Test func errorsSayWhereAndWhat() {
        #expect(error("{ a") == GraphQLSyntaxError(message: "Expected Name, found <EOF>.", line: 1, column: 4))
        #expect(error("query {\n  a(b: 1x)\n}")?.line == 2)
        #expect(error("query {\n  a(b: 1x)\n}")?.column == 9)
        #expect(error("query {\r\n  a\r\n  ]\r\n}") == GraphQLSyntaxError(message: "Expected Name, found \"]\".", line: 3, column: 3))
        #expect(error("type T { a: Int }")?.message.contains("operations and fragments only") == true)
        #expect(error("{ a(b: \"\u{01}\") }")?.message == "Invalid character within String: U+0001.")
        #expect(error("{ a(b: \"\u{01}\") }")?.description == "Syntax Error (1:9): Invalid character within String: U+0001.")
    }

    @Test func subscribeRequestsUseIt() throws {
        let refused = #expect(throws: SubscribeRequest.Invalid.self) {
            try SubscribeRequest.parse(.init(string: #"{"query":"subscription { tick(x: 1a) }"}"#))
        }
        #expect(refused?.code == .invalidDocument)
        #expect(refused?.message.hasPrefix("Syntax Error (1:25): Invalid number") == true)
    }

    /// Documents made by cutting, doubling and swapping the tokens of valid ones. Wherever
    /// GraphQLSwift's parser reads a document of operations and fragments, ours reads the
    /// same operations; wherever it refuses one, ours refuses it too. Where the two differ
    /// by the specification (a number run into a name, `\u{…}` and surrogate-pair escapes,
    /// which GraphQLSwift does not read), the documents are left out.
    @Test func agreesWithGraphQLSwiftOnMutatedDocuments() throws {
        let seeds = [
            "query Q($a: [Int!]! = [1], $b: In = {x: \"s\"}) @d(x: 1) { f(a: $a, b: $b) { g ...F ... on T { h } } }",
            "subscription S { tick(every: 1.5e3) @include(if: true) { n } }",
            "mutation { m(input: {a: [1, 2, {b: null}], c: ENUM, d: \"\"\"x\"\"\"}) }",
            "fragment F on T { a b: c(d: false) } { x { ...F } }",
            "{ a } query B { b } mutation C { c }",
        ]
        var random = SplitMix64(seed: 0x6471_6c6d_7578)
        var compared = 0
        var accepted = 0
        for seed in seeds {
            let tokens = tokenize(seed)
            for _ in 0..<400 {
                var t = tokens
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let i = Int.random(in: 0..<t.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: t.remove(at: i)
                    case 1: t.insert(t[i], at: i)
                    case 2: t.swapAt(i, Int.random(in: 0..<t.count, using: &random))
                    default: t.insert(["{", "}", "(", ")", "[", "]", ":", "$", "...", "@", "on", "!", "=", "1", "x"].randomElement(using: &random)!, at: i)
                    }
                    if t.isEmpty { t = ["{"] }
                }
                let document = t.joined(separator: " ")
                let reference: [Op]?
                do {
                    let parsed = try GraphQL.parse(source: document, noLocation: true)
                    guard parsed.definitions.allSatisfy({ $0 is OperationDefinition || $0 is FragmentDefinition }) else { continue }
                    reference = parsed.definitions.compactMap { $0 as? OperationDefinition }.map { op in
                        Op(kind: op.operation == .subscription ? .subscription : op.operation == .mutation ? .mutation : .query, name: op.name?.value)
                    }
                } catch {
                    reference = nil
                }
                let ours = try? operations(document)
                #expect(ours == reference, "\(document)")
                compared += 1
                if reference != nil { accepted += 1 }
            }
        }
        #expect(compared > 1500)
        #expect(accepted > 100)  // the comparison saw both outcomes many times
    }

    /// Splits a document on white space, keeping strings and punctuators whole.
    private func tokenize(_ document: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        var inString = false
        for ch in document {
            if ch == "\"" { inString.toggle() }
            if !inString, ch == " " || "{}()[]:$@!=".contains(ch) {
                if !current.isEmpty { tokens.append(current) }
                current = ""
                if ch != " " { tokens.append(String(ch)) }
            } else {
                current.append(ch)
            }
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }
}
