import Crypto

/// SHA-256 and HMAC-SHA256 for Signature Version 4 and for naming identities, from swift-crypto
/// (BoringSSL's implementation on Linux): no hashing of our own on a path that signs requests.
package enum SHA256 {
    /// The 32-byte digest of `message`.
    package static func hash(_ message: some Collection<UInt8>) -> [UInt8] {
        Array(Crypto.SHA256.hash(data: Array(message)))
    }

    /// HMAC-SHA256 of `message` under `key`.
    package static func hmac(key: some Collection<UInt8>, _ message: some Collection<UInt8>) -> [UInt8] {
        Array(HMAC<Crypto.SHA256>.authenticationCode(for: Array(message), using: SymmetricKey(data: Array(key))))
    }

    /// Lower-case hexadecimal.
    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
    }
}
