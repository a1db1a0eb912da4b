import Foundation
import GQLMuxDaemon
import NIOCore
import TestUpstream
import Testing

/// Results that arrive together are written subscriber by subscriber (a run), yet every client
/// sees exactly the order the upstream sent: results before the end that followed them, and
/// the results of different subscriptions interleaved as they arrived.
@Suite(.serialized) struct ResultRunTests {
    /// The tick numbers of the `next` lines of subscription `id`, in the order they were read.
    static func ticks(_ client: LineClient, _ id: String) -> [Int] {
        client.lines(containing: #""type":"next","id":"\#(id)""#).compactMap { line in
            guard let range = line.range(of: #""tick":"#) else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
    }

    @Test func resultsReadTogetherWithTheCompletionReachEveryClientBeforeIt() async throws {
        try await DaemonRig.with { rig in
            let clients = [try await rig.connect(), try await rig.connect(), try await rig.connect()]
            for (index, client) in clients.enumerated() { client.subscribe(id: "c\(index)") }
            await rig.upstreamActive(1)
            for (index, client) in clients.enumerated() {
                await until("client \(index) active", on: client) { !client.lines(containing: #""state":"active""#).isEmpty }
            }
            await rig.server.tickThenEnd(count: 300)
            for (index, client) in clients.enumerated() {
                await until("client \(index) completed", on: client) { !client.lines(containing: #""type":"complete""#).isEmpty }
                #expect(Self.ticks(client, "c\(index)") == Array(1...300), "client \(index)")
                let lines = client.lines
                let complete = try #require(lines.firstIndex { $0.contains(#""type":"complete""#) })
                #expect(complete == lines.count - 1, "the completion is the last line")
                #expect(!lines[complete - 1].contains(#""type":"state""#), "the line before it is a result")
            }
        }
    }

    /// SSE and multipart clients of one subscription are handed the same chunks (framed once
    /// for all of each kind): each still reads a whole, valid chunked body with every result
    /// in order, then the end; a line client beside them gets its own lines. The first three
    /// results are large (passed by reference, not framed into shared chunks).
    @Test func streamClientsOfOneSubscriptionShareChunksAndEachReadsEveryResultInOrder() async throws {
        try await DaemonRig.with { rig in
            let multipart = "multipart/mixed;subscriptionSpec=1.0"
            let kinds = ["text/event-stream", "text/event-stream", "text/event-stream", multipart, multipart]
            var streams: [RawStreamClient] = []
            for accept in kinds {
                let stream = try await RawStreamClient.connect(rig.directory + "/graphql.sock", group: rig.clientGroup)
                stream.subscribeToTicks(accept: accept)
                streams.append(stream)
            }
            let line = try await rig.connect()
            line.subscribe(id: "l")
            await rig.upstreamActive(1)
            await eventually("every stream answered") { streams.allSatisfy { (try? $0.response()) != nil } }
            await until("the line client active", on: line) { !line.lines(containing: #""state":"active""#).isEmpty }

            await rig.server.tickThenEnd(count: 1_000) { $0 < 3 ? 3_000 : 0 }
            await eventually("every stream ended") { streams.allSatisfy { (try? $0.response())?.ended == true } }
            await until("the line client completed", on: line) { !line.lines(containing: #""type":"complete""#).isEmpty }
            #expect(Self.ticks(line, "l") == Array(1...1_000))
            var bodies: [String: String] = [:]
            for (index, stream) in streams.enumerated() {
                let response = try stream.response()
                let ticks = response.body.components(separatedBy: #""tick":"#).dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }
                #expect(ticks == Array(1...1_000), "stream \(index) (\(kinds[index])): \(ticks.count) results")
                let sse = kinds[index] == "text/event-stream"
                let opening = sse ? "event: next\ndata: " : "content-type: application/json\r\n\r\n{\"payload\":"
                #expect(response.body.components(separatedBy: opening).count - 1 == 1_000, "stream \(index): each result framed as its kind")
                if let first = bodies[kinds[index]] {
                    #expect(first == response.body, "stream \(index) reads what the others of its kind read")
                } else {
                    bodies[kinds[index]] = response.body
                }
            }
        }
    }

    /// A run is framed once for each prefix length among its line clients (at most four such
    /// framings; the others are copied their share), each client's id written in before its
    /// write. Every client reads only its own id, every result in order, including one that did
    /// not read while half a megabyte of results came (what NIO held for it stayed its own
    /// while the others' ids were written into the frames after it).
    @Test func clientsWithIdsOfManyLengthsAndOneThatDoesNotReadEachReadOnlyTheirOwnResults() async throws {
        try await DaemonRig.with { rig in
            let slow = try await rig.connect(autoRead: false)
            slow.subscribe(id: "zz")
            let ids = ["a", "bb", "cc", "ddd", "eeee", "fffff", "gggggg", "hh"]
            var clients: [LineClient] = []
            for id in ids {
                let client = try await rig.connect()
                client.subscribe(id: id)
                clients.append(client)
            }
            await rig.upstreamActive(1)
            for (index, client) in clients.enumerated() {
                await until("\(ids[index]) active", on: client) { !client.lines(containing: #""state":"active""#).isEmpty }
            }
            // 600 results of about 850 bytes: each under the size passed by reference, and
            // together past what the kernel buffers for a client that does not read.
            await rig.server.tickThenEnd(count: 600) { _ in 800 }
            for (index, client) in clients.enumerated() {
                await until("\(ids[index]) completed", on: client) { !client.lines(containing: #""type":"complete""#).isEmpty }
                #expect(Self.ticks(client, ids[index]) == Array(1...600), "client \(ids[index])")
                let foreign = client.lines.filter { !$0.contains(#""id":"\#(ids[index])""#) }
                #expect(foreign.isEmpty, "client \(ids[index]) read another's lines: \(foreign.prefix(1))")
            }
            try await slow.channel.setOption(.autoRead, value: true).get()
            slow.channel.read()
            await until("the slow client completed", on: slow) { !slow.lines(containing: #""type":"complete""#).isEmpty }
            #expect(Self.ticks(slow, "zz") == Array(1...600))
            #expect(slow.lines.allSatisfy { $0.contains(#""id":"zz""#) })
        }
    }

    @Test func resultsReadTogetherWithAnUpstreamCloseComeBeforeReconnecting() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.subscribe(id: "s")
            await rig.upstreamActive(1)
            await until("active", on: client) { !client.lines(containing: #""state":"active""#).isEmpty }
            await rig.server.tickThenEnd(count: 200, closeCode: 1001)
            await until("reconnecting", on: client) { !client.lines(containing: #""state":"reconnecting""#).isEmpty }
            let lines = client.lines
            let reconnecting = try #require(lines.firstIndex { $0.contains(#""state":"reconnecting""#) })
            let results = lines.indices.filter { lines[$0].contains(#""type":"next""#) }
            #expect(results.count == 200)
            #expect(results.allSatisfy { $0 < reconnecting }, "every result before reconnecting")
            #expect(Self.ticks(client, "s") == Array(1...200))
        }
    }

    @Test func resultsOfTwoSubscriptionsKeepTheirInterleaving() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.subscribe(id: "a", "subscription { tick(n: 1) }")
            await rig.upstreamActive(1)
            client.subscribe(id: "b", "subscription { tick(n: 2) }")
            await rig.upstreamActive(2)
            await until("both active", on: client) { client.lines(containing: #""state":"active""#).count == 2 }
            await rig.server.tick(count: 100)
            await until("200 results", on: client) { client.lines(containing: #""type":"next""#).count == 200 }
            // The upstream sends each tick to both subscriptions, always in the same order: so
            // must the client read them (a run of one is written before the other's begins).
            let order = client.lines(containing: #""type":"next""#).map { $0.contains(#""id":"a""#) ? "a" : "b" }
            let pair = Array(order.prefix(2))
            #expect(Set(pair) == ["a", "b"])
            #expect(order == Array(repeating: pair, count: 100).flatMap { $0 })
            #expect(Self.ticks(client, "a") == Array(1...100))
            #expect(Self.ticks(client, "b") == Array(1...100))
        }
    }
}
