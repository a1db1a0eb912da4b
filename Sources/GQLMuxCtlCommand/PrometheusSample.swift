import JSONEnvelope

/// One sample line of the Prometheus text exposition: `name{label="value",…} value`.
struct PrometheusSample {
    var name: String
    var labels: [String: String]
    /// A number, or the exposition's text for one JSON cannot hold (`+Inf`, `-Inf`, `NaN`).
    var value: JSONValue

    /// Every sample of `text`; comments (`# HELP`, `# TYPE`) and blank lines are skipped, and a
    /// line that does not parse is skipped rather than guessed at.
    static func parse(_ text: String) -> [PrometheusSample] {
        text.split(separator: "\n").compactMap { line in
            line.hasPrefix("#") ? nil : PrometheusSample(Substring(line))
        }
    }

    init?(_ line: Substring) {
        var rest = line[...]
        let name = rest.prefix { $0 != "{" && $0 != " " }
        guard !name.isEmpty else { return nil }
        self.name = String(name)
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while let first = rest.first, first != "}" {
                if first == "," {
                    rest = rest.dropFirst()
                    continue
                }
                let key = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { return nil }
                rest = rest.dropFirst(2)
                var value = ""
                var escaped = false
                while let c = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(c == "n" ? "\n" : c)
                        escaped = false
                    } else if c == "\\" {
                        escaped = true
                    } else if c == "\"" {
                        break
                    } else {
                        value.append(c)
                    }
                }
                labels[String(key)] = value
            }
            guard rest.first == "}" else { return nil }
            rest = rest.dropFirst()
        }
        self.labels = labels
        guard let text = rest.split(separator: " ").first else { return nil }
        if let number = Double(text), number.isFinite {
            value = .number(number)
        } else {
            value = .string(String(text))
        }
    }
}
