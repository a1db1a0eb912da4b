/// AWS credentials: an access key, its secret, and a session token for temporary ones.
package struct AWSCredentials: Sendable, Equatable {
    package var accessKeyID: String
    package var secretAccessKey: String
    package var sessionToken: String?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// AWS Signature Version 4 of one HTTP request, as a pure function of the request, the
/// credentials and the time: the canonical request (method, path, query, the signed headers
/// with their values trimmed and inner white space collapsed, sorted by lower-case name, and the
/// body's SHA-256), the string to sign under the scope `DATE/REGION/SERVICE/aws4_request`, and
/// the key derived from the secret through the date, region and service. Tested against the
/// signatures botocore computes for the same inputs.
package enum SignatureV4 {
    /// The headers that sign `method https://host path?query` with `body`: `X-Amz-Date`,
    /// `X-Amz-Security-Token` (with a session token) and `Authorization`, in that order.
    /// `headers` are the request's own, all of them signed (with `host`, always).
    /// - Parameter time: seconds since 1970-01-01 UTC.
    package static func sign(
        method: String = "POST",
        host: String,
        path: String,
        query: String = "",
        headers: [(name: String, value: String)] = [],
        body: [UInt8],
        service: String,
        region: String,
        credentials: AWSCredentials,
        time: Int64
    ) -> [(name: String, value: String)] {
        let (date, timestamp) = Self.timestamp(time)
        var added: [(name: String, value: String)] = [("X-Amz-Date", timestamp)]
        if let token = credentials.sessionToken { added.append(("X-Amz-Security-Token", token)) }
        var signed: [(name: String, value: String)] = (headers + added).map { ($0.name.lowercased(), collapse($0.value)) }
        if !signed.contains(where: { $0.name == "host" }) { signed.append(("host", host)) }
        signed.sort { $0.name < $1.name }
        let signedNames = signed.map(\.name).joined(separator: ";")
        let canonical = [
            method,
            encodePath(path),
            query,
            signed.map { "\($0.name):\($0.value)\n" }.joined(),
            signedNames,
            SHA256.hex(SHA256.hash(body)),
        ].joined(separator: "\n")
        let scope = "\(date)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(timestamp)\n\(scope)\n" + SHA256.hex(SHA256.hash(Array(canonical.utf8)))
        var key = SHA256.hmac(key: Array(("AWS4" + credentials.secretAccessKey).utf8), Array(date.utf8))
        for part in [region, service, "aws4_request"] { key = SHA256.hmac(key: key, Array(part.utf8)) }
        let signature = SHA256.hex(SHA256.hmac(key: key, Array(stringToSign.utf8)))
        added.append(
            ("Authorization", "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedNames), Signature=\(signature)")
        )
        return added
    }

    /// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ` of `time` (seconds since 1970-01-01 UTC).
    package static func timestamp(_ time: Int64) -> (date: String, timestamp: String) {
        let days = time >= 0 ? time / 86_400 : (time - 86_399) / 86_400
        let seconds = time - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let date = "\(year)" + two(month) + two(day)
        return (date, date + "T" + two(seconds / 3_600) + two(seconds / 60 % 60) + two(seconds % 60) + "Z")
    }

    /// A header value as signed: trimmed, each run of white space one space.
    private static func collapse(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).joined(separator: " ")
    }

    /// The path, percent-encoded except for unreserved characters and `/`.
    private static func encodePath(_ path: String) -> String {
        uriEncode(Array((path.isEmpty ? "/" : path).utf8), keepSlash: true)
    }

    /// A request's query string as Signature Version 4 signs it: each `name=value` decoded,
    /// then encoded as the canonical form asks (unreserved bytes as they are, every other byte
    /// `%XX`), sorted by name and then value, joined by `&`; a parameter without `=` gets an
    /// empty value. `""` for no query.
    package static func canonicalQuery(_ query: String) -> String {
        let parameters = query.split(separator: "&", omittingEmptySubsequences: true).map { part -> (String, String) in
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = uriEncode(percentDecoded(pair[0]), keepSlash: false)
            let value = pair.count > 1 ? uriEncode(percentDecoded(pair[1]), keepSlash: false) : ""
            return (name, value)
        }
        return parameters.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// `text`'s bytes with each `%XX` decoded and `+` kept as it is (a form's space is `%20` here).
    private static func percentDecoded(_ text: Substring) -> [UInt8] {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 3986 percent-encoding as AWS signs it: unreserved bytes kept (and `/` in a path).
    private static func uriEncode(_ bytes: [UInt8], keepSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepSlash:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The AWS shared credentials file (`~/.aws/credentials`): INI sections named by profile, with
/// `aws_access_key_id`, `aws_secret_access_key` and `aws_session_token`.
package enum AWSCredentialsFile {
    /// The credentials of `profile` in `text`; nil when the profile or either key is missing.
    package static func credentials(in text: String, profile: String) -> AWSCredentials? {
        var section: String?
        var values: [String: String] = [:]
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingSpaces()
                continue
            }
            guard section == profile, let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals]).trimmingSpaces().lowercased()] = String(line[line.index(after: equals)...]).trimmingSpaces()
        }
        guard let id = values["aws_access_key_id"], !id.isEmpty, let secret = values["aws_secret_access_key"], !secret.isEmpty else {
            return nil
        }
        let token = values["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 }
        return AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token)
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
