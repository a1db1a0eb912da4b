/// The bench's targets, each judged in one line of the report: met or not met, with the numbers
/// it was judged on (`scripts/bench.sh` ends with them).
struct Verdict {
    let target: String
    let met: Bool
    let numbers: String

    var line: String { "verdict: \(target): \(met ? "met" : "NOT MET") (\(numbers))" }
}

/// One latency run's rows: gqlmuxd's added time and the bare relay's, in µs.
struct LatencyRow {
    var addedP50: Double
    var addedP99: Double
    var relayP50: Double
    var relayP99: Double
    /// Messages sent on each path, and the fewest any path timed (gqlmuxd's, the direct one and
    /// the relay's).
    var samples: Int
    var timed: Int

    /// Added latency p50 within 5 µs of the relay's, and p99 within 50 µs, in this run; a run
    /// that timed fewer than 99 % of its messages on either path meets neither.
    var verdicts: [Verdict] {
        let complete = timed * 100 >= samples * 99
        let counted = complete ? "" : "; only \(timed) of \(samples) messages timed"
        return [
            Verdict(
                target: "latency p50 ≤ bare relay + 5 µs",
                met: complete && addedP50 <= relayP50 + 5,
                numbers: "added \(Int(addedP50.rounded())) µs, relay \(Int(relayP50.rounded())) µs" + counted
            ),
            Verdict(
                target: "latency p99 ≤ bare relay + 50 µs",
                met: complete && addedP99 <= relayP99 + 50,
                numbers: "added \(Int(addedP99.rounded())) µs, relay \(Int(relayP99.rounded())) µs" + counted
            ),
        ]
    }
}

/// The median of `values` (the lower middle of an even count).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[(sorted.count - 1) / 2]
}
