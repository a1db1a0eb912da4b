/// `top`'s screen as lines of text: the daemon's totals, one line per upstream, a status
/// line, then the chosen table. The terminal code only positions and writes them. Pure.
enum TopScreen {
    /// One screen line; the table's header row is `emphasized` (drawn in reverse video).
    struct Line: Equatable {
        var text: String
        var emphasized = false
    }

    /// The totals line: `gqlmuxd 0.1.0  clients 12  subs 30 local, 4 upstream  msgs 1.2M in, 3.4M out`.
    static func totals(_ s: TopSnapshot, unicode: Bool) -> String {
        "gqlmuxd \(TextCell.sanitized(s.version, unicode: unicode))  clients \(whole(s.clientCount))  subs \(whole(s.localSubscriptions)) local, "
            + "\(whole(s.upstreamSubscriptions)) upstream  msgs \(HumanUnits.count(s.messagesIn)) in, \(HumanUnits.count(s.messagesOut)) out"
    }

    /// One line per upstream: name, state, connections, ping round trip (else the keep-alive
    /// gap), last message's age, reconnects, results per second.
    static func upstreamLines(_ s: TopSnapshot, unicode: Bool) -> [String] {
        let nameWidth = min(20, s.upstreams.map { TextCell.width(TextCell.sanitized($0.name, unicode: unicode)) }.max() ?? 0)
        let stateWidth = s.upstreams.map { $0.state.count }.max() ?? 0
        return s.upstreams.map { u in
            var parts = [
                TextCell.fitted(TextCell.sanitized(u.name, unicode: unicode), to: nameWidth, unicode: unicode),
                TextCell.fitted(TextCell.sanitized(u.state, unicode: unicode), to: stateWidth, unicode: unicode),
                "conns \(u.connections)",
            ]
            if let streams = u.streams { parts.append("streams \(whole(streams))") }
            if let rtt = u.pingRTT {
                parts.append("rtt \(HumanUnits.milliseconds(rtt))")
            } else if let gap = u.keepAliveGap {
                parts.append("ka \(HumanUnits.seconds(gap))")
            }
            parts.append("last " + (u.lastMessageAge.map(HumanUnits.seconds) ?? "-"))
            parts.append("reconnects \(whole(u.reconnects))")
            parts.append("\(HumanUnits.rate(s.rate(of: u.name))) results/s")
            return "  " + parts.joined(separator: "  ")
        }
    }

    /// The chosen table, filtered and sorted, laid out to `width` (nil: natural widths).
    static func table(_ s: TopSnapshot, state: TopState, table: TopTable, width: Int?, context: TableContext) -> RenderedTable {
        switch table {
        case .clients:
            let rows = TableLayout.sorted(s.clients(of: state.upstream), columns: ClientRow.columns, by: state.clientOrder)
            return TableLayout.render(rows, columns: ClientRow.columns, order: state.clientOrder, width: width, context: context)
        case .operations:
            let rows = TableLayout.sorted(s.operations(of: state.upstream), columns: OperationRow.columns, by: state.operationOrder)
            return TableLayout.render(rows, columns: OperationRow.columns, order: state.operationOrder, width: width, context: context)
        }
    }

    /// The keys, `q` first: a narrow terminal cuts the end.
    static let keysHelp = "q quit  Tab/c/o table  s/S sort  r reverse  u filter"

    /// The status line's problem, if any: the last refresh failed (`failure`; `lastGood`: when
    /// the rows shown were read), or the one `asked` at that time (monotonic seconds) has taken
    /// longer than the interval and at least 2 s.
    static func notice(failure: String?, lastGood: Double?, asked: Double?, now: Double, interval: Double) -> String? {
        if let failure {
            let age = lastGood.map { " (rows \(HumanUnits.age(now - $0)) old)" } ?? ""
            return "retrying every \(HumanUnits.seconds(interval))\(age): \(failure)"
        }
        if let asked, now - asked >= max(interval, 2) {
            return "waiting for gqlmuxd's answer (\(HumanUnits.age(now - asked)))"
        }
        return nil
    }

    /// The live screen: exactly what fits `width` × `height`. `snapshot` nil: nothing read yet;
    /// `notice`: a problem to show on the status line (the daemon unreachable, a slow answer).
    static func frame(snapshot: TopSnapshot?, state: TopState, notice: String?, width: Int, height: Int, context: TableContext) -> [Line] {
        guard width > 0, height > 0 else { return [] }
        let s = snapshot ?? TopSnapshot()
        let rendered = table(s, state: state, table: state.table, width: width, context: context)
        var upstreams = upstreamLines(s, unicode: context.unicode)
        // Keep a row of the table where the height allows: cut the upstream lines first.
        let upstreamRoom = max(0, height - 4)
        if upstreams.count > upstreamRoom {
            let more = upstreams.count - max(0, upstreamRoom - 1)
            upstreams = Array(upstreams.prefix(max(0, upstreamRoom - 1)))
            if upstreamRoom > 0 { upstreams.append("  \(context.unicode ? "…" : "...") \(more) more upstreams") }
        }
        let rowRoom = max(0, height - 3 - upstreams.count)
        let shownRows = Array(rendered.rows.prefix(rowRoom))
        let title = state.table == .clients ? "CLIENTS" : "OPERATIONS"
        let count = shownRows.count < rendered.rows.count ? "\(shownRows.count) of \(rendered.rows.count)" : "\(rendered.rows.count)"
        let filter = "upstream " + (state.upstream.map { TextCell.sanitized($0, unicode: context.unicode) } ?? "all")
        let tail = notice.map { "! " + TextCell.sanitized($0, unicode: context.unicode) } ?? keysHelp
        let status = "\(title) \(count)  \(filter)  \(tail)"
        var lines = [Line(text: snapshot == nil ? "gqlmuxd ?" : totals(s, unicode: context.unicode))]
        lines += upstreams.map { Line(text: $0) }
        lines.append(Line(text: status))
        lines.append(Line(text: rendered.header, emphasized: true))
        lines += shownRows.map { Line(text: $0) }
        return lines.prefix(height).map { Line(text: TextCell.truncated($0.text, to: width, unicode: context.unicode), emphasized: $0.emphasized) }
    }

    /// The plain snapshot (`top --once`, or stdout not a terminal): totals, upstreams, then
    /// both tables whole, with no escape codes.
    static func plain(snapshot s: TopSnapshot, state: TopState, width: Int?, context: TableContext) -> String {
        var lines = [totals(s, unicode: context.unicode)] + upstreamLines(s, unicode: context.unicode)
        for table in [TopTable.clients, .operations] {
            let rendered = Self.table(s, state: state, table: table, width: width, context: context)
            let filter = state.upstream.map { " (upstream \(TextCell.sanitized($0, unicode: context.unicode)))" } ?? ""
            lines += ["", "\(table == .clients ? "CLIENTS" : "OPERATIONS") \(rendered.rows.count)\(filter)", rendered.header]
            lines += rendered.rows
        }
        guard let width else { return lines.joined(separator: "\n") }
        return lines.map { TextCell.truncated($0, to: width, unicode: context.unicode) }.joined(separator: "\n")
    }
}
