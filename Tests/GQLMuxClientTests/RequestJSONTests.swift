import Foundation
import GQLMuxClient
import Testing

/// The client's Foundation conveniences: a request's JSON from a dictionary of variables, and a
/// result as Foundation objects.
@Suite struct RequestJSONTests {
    static func object(_ json: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    @Test func variablesAreWrittenAsJSONWithTheOptionsUnderExtensions() throws {
        let json = try GQLMuxClient.requestJSON(
            query: "subscription S($n: Int) { tick(n: $n) }",
            variables: ["n": 3, "name": "a\"b", "list": [1, 2], "none": NSNull()],
            operationName: "S",
            replayLast: true,
            resnapshot: "query Now { now }"
        )
        let request = try Self.object(json)
        #expect(request["query"] as? String == "subscription S($n: Int) { tick(n: $n) }")
        #expect(request["operationName"] as? String == "S")
        let variables = try #require(request["variables"] as? [String: Any])
        #expect(variables["n"] as? Int == 3 && variables["name"] as? String == "a\"b" && variables["list"] as? [Int] == [1, 2])
        #expect(variables["none"] is NSNull)
        let options = (request["extensions"] as? [String: Any])?["gqlmux"] as? [String: Any]
        #expect(options?["replayLast"] as? Bool == true && options?["resnapshot"] as? String == "query Now { now }")
        #expect(json.contains(#""variables":{"list":[1,2],"n":3,"name":"a\"b","none":null}"#), "keys sorted: the same variables, the same text")
    }

    @Test func noVariablesAndNoOptionsWriteNeither() throws {
        let request = try Self.object(try GQLMuxClient.requestJSON(query: "{ hello }", variables: nil, operationName: nil))
        #expect(Set(request.keys) == ["query"])
    }

    @Test func variablesThatAreNotJSONAreRefusedWithBadRequest() {
        struct Opaque: Sendable {}
        let error = #expect(throws: GQLMuxError.self) {
            try GQLMuxClient.requestJSON(query: "{ a }", variables: ["x": Opaque()], operationName: nil)
        }
        #expect(error?.code == "BAD_REQUEST")
    }

    @Test func aResultReadsAsFoundationObjects() {
        let result = GQLMuxResult(json: #"{"data":{"tick":{"n":1}},"errors":[{"message":"m"}]}"#)
        #expect((result.object?["data"] as? [String: Any])?["tick"] as? [String: Int] == ["n": 1])
        #expect((result.object?["errors"] as? [[String: String]])?.first?["message"] == "m")
        #expect(GQLMuxResult(json: "[1]").object == nil, "not an object")
    }
}
