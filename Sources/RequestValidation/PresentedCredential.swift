import GQLMuxVocabulary
import HTTPFields
import JSONEnvelope
import NIOCore

/// What a local client presents for upstreams that carry each client's own credentials
/// (`identity = "client"`): a connecting payload (a JSON object) and request headers. Kept by
/// its session only; never logged.
package struct PresentedCredential: Sendable, Equatable {
    /// The JSON object to send as the upstream `connection_init` payload.
    package var payload: [UInt8]?
    /// Header names as given (compared lowercased), values as given.
    package var headers: [Header]

    package typealias Header = HeaderField

    package init(payload: [UInt8]? = nil, headers: [Header] = []) {
        self.payload = payload
        self.headers = headers
    }

    /// Its size as `[limits] max_credential_bytes` counts it: the payload's bytes and each
    /// header's name and value.
    package var byteCount: Int {
        headers.reduce(payload?.count ?? 0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
    }

    /// Whether it presents nothing.
    package var isEmpty: Bool { payload == nil && headers.isEmpty }

    /// Whether `name` and `value` may travel as an HTTP header: a token name, a value without
    /// control characters (no CR or LF to inject another header).
    package static func isValidHeader(name: String, value: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256 && value.utf8.count <= 8192
            && name.utf8.allSatisfy { $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }
            && value.utf8.allSatisfy { $0 >= 32 && $0 != 127 || $0 == UInt8(ascii: "\t") }
    }

    /// A line client's `connection_init` payload's `upstream` member:
    /// `{"payload": {…}, "headers": {"authorization": "Bearer …"}}`. nil when there is none;
    /// an error names what is wrong with it.
    package init?(lineInit payload: ByteBuffer) throws(PresentedCredentialError) {
        let found: (range: Range<Int>, kind: JSONValueKind)? = payload.withUnsafeReadableBytes { bytes in
            var found: (Range<Int>, JSONValueKind)?
            try? JSONScanner.visitObject(bytes) { key, kind, value in
                if JSONScanner.key(key, in: bytes, is: "upstream") { found = (value, kind) }
            }
            return found
        }
        guard let found else { return nil }
        guard found.kind == .object else { throw PresentedCredentialError("payload.upstream must be an object {\"payload\": {…}, \"headers\": {…}}") }
        let upstream = payload.getSlice(at: payload.readerIndex + found.range.lowerBound, length: found.range.count)!
        var result = PresentedCredential()
        var failure: PresentedCredentialError?
        upstream.withUnsafeReadableBytes { bytes in
            guard let members = try? JSONScanner.scanObject(bytes) else { return }
            for member in members {
                switch member.key {
                case "payload":
                    guard member.kind == .object else {
                        failure = PresentedCredentialError("payload.upstream.payload must be a JSON object")
                        return
                    }
                    result.payload = Array(UnsafeRawBufferPointer(rebasing: bytes[member.range]))
                case "headers":
                    guard member.kind == .object else {
                        failure = PresentedCredentialError("payload.upstream.headers must be an object of strings")
                        return
                    }
                    let inner = UnsafeRawBufferPointer(rebasing: bytes[member.range])
                    guard let headers = try? JSONScanner.scanObject(inner) else { return }
                    for header in headers {
                        guard header.kind == .string else {
                            failure = PresentedCredentialError("payload.upstream.headers.\(header.key) must be a string")
                            return
                        }
                        let value = JSONScanner.decodeString(inner, header.range)
                        guard Self.isValidHeader(name: header.key, value: value) else {
                            failure = PresentedCredentialError("payload.upstream.headers: '\(header.key.prefix(64))' is not a valid HTTP header")
                            return
                        }
                        result.headers.append(Header(name: header.key, value: value))
                    }
                default:
                    failure = PresentedCredentialError("payload.upstream: unknown member '\(member.key.prefix(64))' (payload, headers)")
                    return
                }
            }
        }
        if let failure { throw failure }
        self = result
    }
}

/// What is wrong with a presented credential.
package struct PresentedCredentialError: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
