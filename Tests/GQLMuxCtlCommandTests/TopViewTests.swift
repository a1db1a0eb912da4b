import JSONEnvelope
import Testing

@testable import GQLMuxCtlCommand

/// gqlmuxctl's operator view, without a daemon or a terminal: human units, cells, table layout
/// and width fitting, sorting, the upstream filter, keys, and `top`'s screen.
struct TopViewTests {
    static let now = 1_764_322_300.0

    static func client(
        _ id: Int,
        name: String,
        queued: Int = 0,
        rate: Double = 0,
        upstreams: [(String, String)] = [("default", "host")],
        kind: String = "line"
    ) -> String {
        let uses = upstreams.map { #"{"upstream":"\#($0.0)","identity":"\#($0.1)"}"# }.joined(separator: ",")
        return """
            {"id":\(id),"kind":"\(kind)","listener":"line","uid":1000,"gid":1000,"pid":\(4000 + id),"process":"python3",\
            "name":"\(name)","upstreams":[\(uses)],"subscriptions":2,"results":1234,"bytes":567890,"rate":\(rate),\
            "byteRate":4096.0,"queuedBytes":\(queued),"queuedPeakBytes":65536,"slowConsumerCuts":0,\
            "connectedAt":1764322222.512,"restarts":0}
            """
    }

    static func operation(_ id: String, name: String, upstream: String = "default", rate: Double, state: String = "active") -> String {
        """
        {"id":"\(id)","upstream":"\(upstream)","identity":"host","kind":"subscription","operation":"\(name)",\
        "state":"\(state)","subscribers":3,"results":100,"rate":\(rate),"lastResultAge":0.4,"outages":1,\
        "gapSeconds":2.1,"startedAt":1764322222.512}
        """
    }

    static let status = """
        {"version":"0.1.0","upstream":{"state":"connected"},"upstreams":{\
        "default":{"state":"connected","connections":[{"id":0}],"reconnects":2,"pingRTT":0.0032,"lastMessageAge":0.4,"identity":"host"},\
        "second":{"state":"reconnecting","connections":[],"reconnects":0,"pingRTT":null,"lastMessageAge":null,"identity":"client",\
        "identities":[{"id":"3f2a9c1b0000","state":"connected","connections":2,"reconnects":0,"pingRTT":null,"keepAliveGap":10.0,\
        "lastMessageAge":3.0},{"id":"aaaaaaaaaaaa","state":"connected","connections":1,"reconnects":0,"keepAliveGap":9.5,\
        "lastMessageAge":1.5}]}},\
        "clients":3,"subscriptions":{"local":7,"upstream":3},"messages":{"in":1234567,"out":3400000}}
        """

    static func snapshot(clients: [String]? = nil, operations: [String]? = nil) -> TopSnapshot {
        let clients =
            clients ?? [
                client(1, name: "weather-app", queued: 0, rate: 12.5),
                client(2, name: "slow-reader", queued: 3_500_000, rate: 40, upstreams: [("default", "host"), ("second", "3f2a9c1b04d7")]),
                client(3, name: "dashboard", queued: 2048, rate: 1, upstreams: [("second", "3f2a9c1b04d7")], kind: "graphql-transport-ws"),
            ]
        let operations =
            operations ?? [
                operation("17", name: "OnTick", rate: 2),
                operation("18", name: "prices", rate: 48.5),
                operation("4", name: "me", upstream: "second", rate: 7, state: "reconnecting"),
            ]
        return TopSnapshot(status: status, clients: "[" + clients.joined(separator: ",") + "]", operations: "[" + operations.joined(separator: ",") + "]")!
    }

    static let context = TableContext(now: now, unicode: true)

    /// The column just after the first `needle` in `line` (counted in characters).
    static func end(of needle: String, in line: String) -> Int? {
        let text = Array(line)
        let word = Array(needle)
        guard text.count >= word.count else { return nil }
        for start in 0...(text.count - word.count) where Array(text[start..<start + word.count]) == word { return start + word.count }
        return nil
    }

    // MARK: - Units and cells

    @Test func countsAndBytesInHumanUnits() {
        #expect(HumanUnits.count(0) == "0")
        #expect(HumanUnits.count(999) == "999")
        #expect(HumanUnits.count(1234) == "1.2K")
        #expect(HumanUnits.count(12_345) == "12K")
        #expect(HumanUnits.count(999_999) == "1.0M")
        #expect(HumanUnits.count(3_400_000) == "3.4M")
        #expect(HumanUnits.bytes(512) == "512")
        #expect(HumanUnits.bytes(1536) == "1.5K")
        #expect(HumanUnits.bytes(64 * 1024) == "64K")
        #expect(HumanUnits.bytes(3.4 * 1024 * 1024) == "3.4M")
        #expect(HumanUnits.bytes(-1) == "0")
    }

    @Test func ratesAndDurationsInHumanUnits() {
        #expect(HumanUnits.rate(0) == "0")
        #expect(HumanUnits.rate(0.44) == "0.4")
        #expect(HumanUnits.rate(2) == "2.0")
        #expect(HumanUnits.rate(9.96) == "10")
        #expect(HumanUnits.rate(123.4) == "123")
        #expect(HumanUnits.rate(1500) == "1.5K")
        #expect(HumanUnits.rate(.nan) == "0")
        #expect(HumanUnits.age(5.9) == "5s")
        #expect(HumanUnits.age(200) == "3m")
        #expect(HumanUnits.age(7300) == "2h")
        #expect(HumanUnits.age(90_000) == "1d")
        #expect(HumanUnits.age(-3) == "0s")
        #expect(HumanUnits.seconds(0.4) == "0.4s")
        #expect(HumanUnits.seconds(12) == "12s")
        #expect(HumanUnits.milliseconds(0.0032) == "3.2ms")
        #expect(HumanUnits.milliseconds(0.023) == "23ms")
    }

    @Test func cellsNeverCarryWhatATerminalActsOn() {
        #expect(TextCell.sanitized("a\u{1B}[31mb\u{7}") == "a?[31mb?")
        #expect(TextCell.sanitized("x\u{9B}2J") == "x?2J")  // C1 CSI
        #expect(TextCell.sanitized("ab\u{202E}cd") == "ab?cd")  // a bidi override
        #expect(TextCell.sanitized("e\u{301}") == "e?")  // a combining mark
        #expect(TextCell.sanitized("café 天气") == "café 天气")
        #expect(TextCell.sanitized("café", unicode: false) == "caf?")
        #expect(TextCell.width("天气ab") == 6)
    }

    @Test func cellsAreCutAndPaddedByColumns() {
        #expect(TextCell.truncated("abcdef", to: 4) == "abc…")
        #expect(TextCell.truncated("abcdef", to: 4, unicode: false) == "abc~")
        #expect(TextCell.truncated("abcd", to: 4) == "abcd")
        #expect(TextCell.truncated("天气预报", to: 5) == "天气…")
        #expect(TextCell.fitted("ab", to: 4, right: true) == "  ab")
        #expect(TextCell.fitted("ab", to: 4) == "ab  ")
        #expect(TextCell.fitted("abcdef", to: 3) == "ab…")
    }

    // MARK: - Rows and tables

    @Test func rowsReadTheDaemonsMembers() throws {
        let s = Self.snapshot()
        let slow = try #require(s.clients.first { $0.name == "slow-reader" })
        #expect(slow.id == 2)
        #expect(slow.queuedBytes == 3_500_000)
        #expect(slow.shownUpstreams == "default,second:3f2a9c1b04d7")
        #expect(s.clients[2].shownKind == "ws")
        #expect(s.operations[2].state == "reconnecting")
        #expect(s.operations[2].lastResultAge == 0.4)
        // Unknown members and a null read as unknown, not as a failure.
        let odd = ClientRow(JSONValue.parse(#"{"id":9,"uid":null,"pid":null,"process":null,"extra":true}"#)!)
        #expect(odd.uid == nil && odd.process == nil && odd.name == "")
        #expect(TopSnapshot(status: "[]", clients: "[]", operations: "[]") == nil)
    }

    @Test func naturalWidthsShowEveryColumn() {
        let s = Self.snapshot()
        let table = TableLayout.render(s.clients, columns: ClientRow.columns, order: nil, width: nil, context: Self.context)
        #expect(table.header.split(separator: " ").map(String.init) == ClientRow.columns.map(\.header))
        #expect(table.hidden.isEmpty)
        #expect(table.rows.count == 3)
        let slow = table.rows[1]
        #expect(slow.contains("slow-reader") && slow.contains("3.3M") && slow.contains("1m"))
        // Numbers are right-aligned under their header.
        #expect(Self.end(of: "QUEUED", in: table.header) != nil)
        #expect(Self.end(of: "3.3M", in: slow) == Self.end(of: "QUEUED", in: table.header))
    }

    @Test func aNarrowTableKeepsItsFirstColumnsAndTheSortColumn() {
        let s = Self.snapshot()
        for width in [40, 60, 80, 100, 120] {
            let table = TableLayout.render(s.clients, columns: ClientRow.columns, order: ClientRow.defaultOrder, width: width, context: Self.context)
            for line in [table.header] + table.rows { #expect(TextCell.width(line) <= width) }
            #expect(table.header.contains("▼QUEUED"))
            #expect(table.header.contains("NAME"))
        }
        // At 80 columns some give way; the sort column stays even when its priority is low.
        let restarts = ClientRow.columns.firstIndex { $0.header == "RESTARTS" }!
        let table = TableLayout.render(
            s.clients,
            columns: ClientRow.columns,
            order: SortOrder(column: restarts, descending: true),
            width: 60,
            context: Self.context
        )
        #expect(table.header.contains("▼RESTARTS"))
        #expect(!table.hidden.isEmpty)
        #expect(!table.hidden.contains("RESTARTS"))
    }

    @Test func widerTerminalsWidenTheNames() {
        let long = String(repeating: "n", count: 30)
        let s = Self.snapshot(clients: [Self.client(1, name: long, queued: 5)])
        let narrow = TableLayout.render(s.clients, columns: ClientRow.columns, order: ClientRow.defaultOrder, width: 80, context: Self.context)
        let wide = TableLayout.render(s.clients, columns: ClientRow.columns, order: ClientRow.defaultOrder, width: 200, context: Self.context)
        #expect(!narrow.rows[0].contains(long))
        #expect(narrow.rows[0].contains("…"))
        #expect(wide.rows[0].contains(long))
        #expect(wide.hidden.isEmpty)
    }

    @Test func sortingByAColumnEitherWay() {
        let s = Self.snapshot()
        let byQueued = TableLayout.sorted(s.clients, columns: ClientRow.columns, by: ClientRow.defaultOrder)
        #expect(byQueued.map(\.name) == ["slow-reader", "dashboard", "weather-app"])
        var up = ClientRow.defaultOrder
        up.descending = false
        #expect(TableLayout.sorted(s.clients, columns: ClientRow.columns, by: up).map(\.name) == ["weather-app", "dashboard", "slow-reader"])
        let name = ClientRow.columns.firstIndex { $0.header == "NAME" }!
        #expect(
            TableLayout.sorted(s.clients, columns: ClientRow.columns, by: SortOrder(column: name, descending: false)).map(\.name) == [
                "dashboard", "slow-reader", "weather-app",
            ]
        )
        // Ties keep the daemon's order.
        let subs = ClientRow.columns.firstIndex { $0.header == "SUBS" }!
        #expect(TableLayout.sorted(s.clients, columns: ClientRow.columns, by: SortOrder(column: subs, descending: true)).map(\.id) == [1, 2, 3])
        let byRate = TableLayout.sorted(s.operations, columns: OperationRow.columns, by: OperationRow.defaultOrder)
        #expect(byRate.map(\.operation) == ["prices", "me", "OnTick"])
        // Operation ids sort as numbers.
        let id = OperationRow.columns.firstIndex { $0.header == "ID" }!
        #expect(TableLayout.sorted(s.operations, columns: OperationRow.columns, by: SortOrder(column: id, descending: false)).map(\.id) == ["4", "17", "18"])
    }

    @Test func theUpstreamFilterKeepsItsRows() {
        let s = Self.snapshot()
        #expect(s.clients(of: nil).count == 3)
        #expect(s.clients(of: "second").map(\.name) == ["slow-reader", "dashboard"])
        #expect(s.operations(of: "second").map(\.operation) == ["me"])
        #expect(s.operations(of: "nowhere").isEmpty)
        #expect(s.rate(of: "default") == 50.5)
    }

    // MARK: - Keys

    @Test func keysFromBytes() {
        var decoder = KeyDecoder()
        #expect(decoder.feed(Array("q\tS".utf8)) == [.character("q"), .tab, .character("S")])
        #expect(decoder.feed([0x1B, UInt8(ascii: "["), UInt8(ascii: "C")]) == [.right])
        #expect(decoder.feed([0x1B, UInt8(ascii: "O"), UInt8(ascii: "D")]) == [.left])
        // A sequence split across reads, then an arrow up (ignored) and a function key.
        #expect(decoder.feed([0x1B, UInt8(ascii: "[")]).isEmpty)
        #expect(decoder.feed([UInt8(ascii: "D")]) == [.left])
        #expect(decoder.feed(Array("\u{1B}[A\u{1B}[15~o".utf8)) == [.other, .other, .character("o")])
        #expect(decoder.feed(Array("é".utf8)) == [.character("é")])
        #expect(decoder.feed([0x1B]).isEmpty)
        #expect(decoder.pendingEscape)
        decoder.flushEscape()
        #expect(decoder.feed(Array("r".utf8)) == [.character("r")])
    }

    @Test func keysChangeTheView() {
        var state = TopState()
        let names = ["default", "second"]
        #expect(state.table == .clients && state.clientOrder == ClientRow.defaultOrder)
        #expect(state.handle(.tab, upstreams: names) == .redraw && state.table == .operations)
        #expect(state.handle(.tab, upstreams: names) == .redraw && state.table == .clients)
        _ = state.handle(.character("o"), upstreams: names)
        #expect(state.table == .operations)
        _ = state.handle(.character("c"), upstreams: names)
        #expect(state.table == .clients)
        // s moves left: QUEUED → BYTES, largest first; S and > move right again.
        _ = state.handle(.character("s"), upstreams: names)
        #expect(ClientRow.columns[state.clientOrder.column].header == "BYTES" && state.clientOrder.descending)
        _ = state.handle(.character(">"), upstreams: names)
        #expect(state.clientOrder == ClientRow.defaultOrder)
        _ = state.handle(.character("r"), upstreams: names)
        #expect(state.clientOrder.column == ClientRow.defaultOrder.column && !state.clientOrder.descending)
        // Text columns start A to Z; the column wraps around at both ends.
        let name = ClientRow.columns.firstIndex { $0.header == "NAME" }!
        state.clientOrder = SortOrder(column: name + 1, descending: true)
        _ = state.handle(.left, upstreams: names)
        #expect(state.clientOrder == SortOrder(column: name, descending: false))
        state.clientOrder = SortOrder(column: 0, descending: true)
        _ = state.handle(.character("<"), upstreams: names)
        #expect(state.clientOrder.column == ClientRow.columns.count - 1)
        _ = state.handle(.right, upstreams: names)
        #expect(state.clientOrder.column == 0)
        // Sorting the operations leaves the clients' order alone.
        let clients = state.clientOrder
        _ = state.handle(.character("o"), upstreams: names)
        _ = state.handle(.character("S"), upstreams: names)
        #expect(state.clientOrder == clients && state.operationOrder != OperationRow.defaultOrder)
        // u: all → each upstream → all.
        #expect(state.upstream == nil)
        _ = state.handle(.character("u"), upstreams: names)
        #expect(state.upstream == "default")
        _ = state.handle(.character("u"), upstreams: names)
        #expect(state.upstream == "second")
        _ = state.handle(.character("u"), upstreams: names)
        #expect(state.upstream == nil)
        state.upstream = "removed"
        _ = state.handle(.character("u"), upstreams: names)
        #expect(state.upstream == nil)
        #expect(state.handle(.character("x"), upstreams: names) == .none)
        #expect(state.handle(.other, upstreams: names) == .none)
        #expect(state.handle(.character("q"), upstreams: names) == .quit)
    }

    // MARK: - Screens

    @Test func theHeaderTellsTotalsAndEachUpstream() {
        let s = Self.snapshot()
        #expect(TopScreen.totals(s, unicode: true) == "gqlmuxd 0.1.0  clients 3  subs 7 local, 3 upstream  msgs 1.2M in, 3.4M out")
        let lines = TopScreen.upstreamLines(s, unicode: true)
        #expect(lines.count == 2)
        #expect(lines[0] == "  default  connected     conns 1  rtt 3.2ms  last 0.4s  reconnects 2  51 results/s")
        #expect(lines[1] == "  second   reconnecting  conns 3  ka 10s  last 1.5s  reconnects 0  7.0 results/s")
    }

    @Test func aFrameFitsTheTerminal() {
        let many = (1...40).map { Self.client($0, name: "app-\($0)", queued: $0 * 100) }
        let s = Self.snapshot(clients: many)
        for (width, height) in [(80, 24), (120, 30), (40, 10), (20, 3), (200, 60)] {
            let lines = TopScreen.frame(snapshot: s, state: TopState(), notice: nil, width: width, height: height, context: Self.context)
            #expect(lines.count <= height)
            for line in lines { #expect(TextCell.width(line.text) <= width) }
        }
        let lines = TopScreen.frame(snapshot: s, state: TopState(), notice: nil, width: 80, height: 24, context: Self.context)
        #expect(lines.count == 24)
        #expect(lines[3].text.hasPrefix("CLIENTS 19 of 40  upstream all"))
        #expect(lines[4].emphasized && lines[4].text.contains("▼QUEUED"))
        #expect(lines[5].text.contains("app-40"))  // the most queued first
        // The keys' help fits 80 columns whole.
        var operations = TopState()
        operations.table = .operations
        let status = TopScreen.frame(snapshot: s, state: operations, notice: nil, width: 80, height: 24, context: Self.context)[3].text
        #expect(status == "OPERATIONS 3  upstream all  " + TopScreen.keysHelp)
        // Too many upstreams for the height: the table keeps a row.
        let small = TopScreen.frame(snapshot: s, state: TopState(), notice: nil, width: 80, height: 5, context: Self.context)
        #expect(small.count == 5 && small[4].text.contains("app-40"))
    }

    @Test func aFrameShowsTheOperationsAndAProblem() {
        var state = TopState()
        state.table = .operations
        state.upstream = "default"
        let lines = TopScreen.frame(
            snapshot: Self.snapshot(),
            state: state,
            notice: "gqlmuxd: CONNECTION_LOST\u{1B}[2J; retrying every 1.0s",
            width: 80,
            height: 24,
            context: Self.context
        )
        #expect(lines[3].text.hasPrefix("OPERATIONS 2  upstream default  ! gqlmuxd: CONNECTION_LOST?[2J"))
        #expect(lines[4].text.contains("OPERATION") && lines[4].text.contains("▼RATE/S"))
        #expect(lines[5].text.contains("prices") && lines[6].text.contains("OnTick"))
        #expect(lines.count == 7)
        // Nothing read yet.
        let empty = TopScreen.frame(snapshot: nil, state: TopState(), notice: "connecting", width: 80, height: 24, context: Self.context)
        #expect(empty.map(\.text) == ["gqlmuxd ?", "CLIENTS 0  upstream all  ! connecting", empty[2].text])
    }

    @Test func theStatusLineTellsWhatIsWrong() {
        #expect(TopScreen.notice(failure: nil, lastGood: 10, asked: nil, now: 20, interval: 1) == nil)
        #expect(
            TopScreen.notice(failure: "DAEMON_UNAVAILABLE: cannot connect", lastGood: 8, asked: nil, now: 20, interval: 1)
                == "retrying every 1.0s (rows 12s old): DAEMON_UNAVAILABLE: cannot connect"
        )
        #expect(TopScreen.notice(failure: "CONNECTION_LOST", lastGood: nil, asked: nil, now: 20, interval: 0.5) == "retrying every 0.5s: CONNECTION_LOST")
        // An answer in flight is waited for quietly up to the interval (and 2 s at least).
        #expect(TopScreen.notice(failure: nil, lastGood: nil, asked: 19, now: 20, interval: 1) == nil)
        #expect(TopScreen.notice(failure: nil, lastGood: nil, asked: 15, now: 20, interval: 1) == "waiting for gqlmuxd's answer (5s)")
        #expect(TopScreen.notice(failure: nil, lastGood: nil, asked: 15, now: 20, interval: 10) == nil)
    }

    @Test func thePlainSnapshotHasBothTablesAndNoEscapes() {
        let text = TopScreen.plain(snapshot: Self.snapshot(), state: TopState(), width: nil, context: TableContext(now: Self.now, unicode: false))
        #expect(!text.contains("\u{1B}"))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0].hasPrefix("gqlmuxd 0.1.0"))
        #expect(lines.contains("CLIENTS 3") && lines.contains("OPERATIONS 3"))
        #expect(lines.contains { $0.contains("*QUEUED") } && lines.contains { $0.contains("*RATE/S") })
        #expect(text.contains("slow-reader") && text.contains("prices"))
        let fitted = TopScreen.plain(snapshot: Self.snapshot(), state: TopState(), width: 50, context: Self.context)
        #expect(fitted.split(separator: "\n").allSatisfy { TextCell.width(String($0)) <= 50 })
    }
}
