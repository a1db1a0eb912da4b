/// Numbers as the operator's tables show them, short and without Foundation: counts `1.2K`,
/// `34M` (powers of 1000), bytes `1.2K`, `3.4M` (powers of 1024), rates `0.4`, `12`, ages
/// `5s`, `3m`, `2h`, `4d`. Pure.
enum HumanUnits {
    private static let suffixes = ["K", "M", "G", "T", "P", "E"]

    /// A count: as it is below 1000, else with a suffix, one decimal below 10 (`1.2K`, `12K`, `123K`, `1.2M`).
    static func count(_ value: Double) -> String { scaled(value, base: 1000) }

    /// Bytes, in powers of 1024: `512`, `1.2K`, `64K`, `3.4M`.
    static func bytes(_ value: Double) -> String { scaled(value, base: 1024) }

    /// Results per second: `0`, one decimal below 10 (`0.4`, `2.0`), whole below 1000, else as a count.
    static func rate(_ value: Double) -> String {
        guard value.isFinite, value > 0 else { return "0" }
        if let tenths = oneDecimal(value) { return tenths }
        if value.rounded() < 1000 { return String(Int(value.rounded())) }
        return count(value)
    }

    /// An age, truncated to its largest unit: `5s`, `3m`, `2h`, `4d`.
    static func age(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds > 0 else { return "0s" }
        switch seconds {
        case ..<60: return "\(Int(seconds))s"
        case ..<3600: return "\(Int(seconds / 60))m"
        case ..<86400: return "\(Int(seconds / 3600))h"
        default: return "\(Int(min(seconds / 86400, 1e12)))d"
        }
    }

    /// A short duration: one decimal below 10 s (`0.4s`, `2.1s`), else as an age (`12s`, `3m`).
    static func seconds(_ value: Double) -> String {
        guard value.isFinite, value > 0 else { return "0s" }
        if let tenths = oneDecimal(value) { return tenths + "s" }
        return age(value)
    }

    /// Milliseconds of `seconds`: one decimal below 10 ms (`0.4ms`), else whole (`23ms`), past
    /// 10 s as seconds.
    static func milliseconds(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds > 0 else { return "0ms" }
        let ms = seconds * 1000
        if let tenths = oneDecimal(ms) { return tenths + "ms" }
        if ms < 10_000 { return "\(Int(ms.rounded()))ms" }
        return age(seconds)
    }

    /// `value` with one decimal when it rounds to less than 10, else nil.
    private static func oneDecimal(_ value: Double) -> String? {
        let tenths = (value * 10).rounded()
        guard tenths < 100 else { return nil }
        let whole = Int(tenths)
        return "\(whole / 10).\(whole % 10)"
    }

    private static func scaled(_ value: Double, base: Double) -> String {
        guard value.isFinite, value > 0 else { return "0" }
        if value.rounded() < 1000 { return String(Int(value.rounded())) }
        var scaled = value
        for suffix in suffixes {
            scaled /= base
            if let tenths = oneDecimal(scaled) { return tenths + suffix }
            if scaled.rounded() < 1000 { return String(Int(scaled.rounded())) + suffix }
        }
        return "huge"
    }
}
