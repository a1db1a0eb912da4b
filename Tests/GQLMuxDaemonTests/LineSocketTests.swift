import Foundation
import TestUpstream
import Testing

/// The line protocol over the daemon's real Unix socket: the handshake, status, refusals per operation.
@Suite(.serialized) struct LineSocketTests {
    @Test func connectionInitPingAndStatus() async throws {
        try await DaemonRig.with() { rig in
            let c = try await rig.connect()
            c.send(#"{"type":"connection_init","payload":{"protocol":1,"client":"tests"}}"#)
            c.send(#"{"type":"ping","payload":{"n":1}}"#)
            c.subscribe(id: "s")
            c.send(#"{"type":"status","id":"st"}"#)
            await until("status", on: c) { !c.lines(containing: #""type":"status""#).isEmpty }
            #expect(c.lines[0].hasPrefix(#"{"type":"connection_ack","payload":{"protocol":1,"server":"gqlmuxd/"#))
            #expect(c.lines[1] == #"{"type":"pong","payload":{"n":1}}"#)
            let status = try #require(c.lines(containing: #""type":"status""#).first)
            let object = try JSONSerialization.jsonObject(with: Data(status.utf8)) as! [String: Any]
            let payload = object["payload"] as! [String: Any]
            let upstream = payload["upstream"] as! [String: Any]
            #expect(upstream["state"] as? String == "connected")
            #expect(upstream["url"] as? String == rig.server.url)
            #expect(upstream["reconnects"] as? Int == 0)
            #expect(payload["clients"] as? Int == 1)
            #expect((payload["subscriptions"] as! [String: Any])["local"] as? Int == 1)
            #expect((payload["messages"] as! [String: Any])["in"] as? Int == 0)
        }
    }

    @Test(arguments: [
        "this is not json",
        #"{"id":"1"}"#,
        #"{"type":"subscribe","payload":{"query":"{ hello }"}}"#,
        #"{"type":"subscribe","id":"1"}"#,
        #"{"type":"subscribe","id":"","payload":{"query":"{ hello }"}}"#,
        #"{"type":"complete"}"#,
        #"{"type":"teleport","id":"1"}"#,
        #"["type","subscribe"]"#,
        #"{"type":"subscribe","id":7,"payload":{}}"#,
    ])
    func malformedLineGetsAnErrorAndClosesOnlyThatClient(line: String) async throws {
        try await DaemonRig.with() { rig in
            let bystander = try await rig.connect()
            bystander.subscribe(id: "b")
            await rig.upstreamActive(1)
            let bad = try await rig.connect()
            bad.send(line)
            await until("bad client closed", on: bad) { bad.isClosed }
            let error = try #require(bad.lines.first)
            #expect(error.hasPrefix(#"{"type":"error","payload":[{"message":"#))
            #expect(error.contains(#""code":"BAD_REQUEST""#))
            await rig.server.tick()
            await until("bystander unaffected", on: bystander) { !bystander.lines(containing: #""tick":1"#).isEmpty }
            #expect(!bystander.isClosed)
        }
    }

    @Test func invalidDocumentsAndDuplicateIDsAreAnsweredPerOperation() async throws {
        try await DaemonRig.with() { rig in
            let c = try await rig.connect()
            c.subscribe(id: "syntax", "subscription { tick(")
            c.subscribe(id: "two", "query A { hello } query B { hello }")
            c.subscribe(id: "name", "{ hello }")
            c.send(#"{"type":"subscribe","id":"named","payload":{"query":"query A { hello }","operationName":"Nope"}}"#)
            c.send(#"{"type":"subscribe","id":"badvars","payload":{"query":"{ hello }","variables":[1]}}"#)
            c.subscribe(id: "dup")
            c.subscribe(id: "dup")
            await until("five errors", on: c) { c.lines(containing: #""type":"error""#).count == 5 }
            #expect(c.lines(containing: #""id":"syntax""#).first?.contains("INVALID_DOCUMENT") == true)
            #expect(c.lines(containing: #""id":"two""#).first?.contains("INVALID_DOCUMENT") == true)
            #expect(c.lines(containing: #""id":"named""#).first?.contains("INVALID_DOCUMENT") == true)
            #expect(c.lines(containing: #""id":"badvars""#).first?.contains("BAD_REQUEST") == true)
            #expect(c.lines(containing: "DUPLICATE_ID").count == 1)
            #expect(!c.isClosed)
            // Nothing invalid reached the upstream; the valid ones did.
            let stats = await rig.server.currentStats
            #expect(stats.subscribes == 2)
        }
    }

    @Test func overlongLineIsRefused() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nmax_line_bytes = 1024") { rig in
            let c = try await rig.connect()
            c.send(#"{"type":"subscribe","id":"big","payload":{"query":"{ hello }","variables":{"x":""# + String(repeating: "a", count: 4000) + #""}}}"#)
            await until("closed", on: c) { c.isClosed }
            #expect(c.lines.first?.contains("max_line_bytes") == true)
        }
    }
}
