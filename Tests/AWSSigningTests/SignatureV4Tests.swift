import AWSSigning
import Foundation
import GQLMuxTestSupport
import Testing

/// Signature Version 4 as botocore computes it (Tests/Fixtures/sigv4-botocore.json, written by
/// scripts/sigv4-vectors.py with botocore 1.44.8): AppSync's connect, a `start` and an HTTP
/// query, with and without a session token, at a fixed time with fixed credentials. And the
/// hashing under it against the published test vectors.
@Suite struct SignatureV4Tests {
    struct Vector {
        var name, host, region, path, body: String
        var headers: [(name: String, value: String)]
        var credentials: AWSCredentials
        var time: Int64
        var signed: [String: String]
    }

    static func vectors() throws -> [Vector] {
        let path = repositoryRoot() + "/Tests/Fixtures/sigv4-botocore.json"
        let cases = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [[String: Any]])
        return cases.map { c in
            Vector(
                name: c["name"] as! String,
                host: c["host"] as! String,
                region: c["region"] as! String,
                path: c["path"] as! String,
                body: c["body"] as! String,
                headers: (c["headers"] as! [String: String]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                credentials: AWSCredentials(
                    accessKeyID: c["accessKeyID"] as! String,
                    secretAccessKey: c["secretAccessKey"] as! String,
                    sessionToken: c["sessionToken"] as? String
                ),
                time: (c["time"] as! NSNumber).int64Value,
                signed: c["signed"] as! [String: String]
            )
        }
    }

    @Test func everySignatureIsBotocoresOwn() throws {
        let vectors = try Self.vectors()
        #expect(vectors.count == 8)
        for vector in vectors {
            let target = vector.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let added = SignatureV4.sign(
                host: vector.host,
                path: String(target[0]),
                query: SignatureV4.canonicalQuery(target.count > 1 ? String(target[1]) : ""),
                headers: vector.headers,
                body: Array(vector.body.utf8),
                service: "appsync",
                region: vector.region,
                credentials: vector.credentials,
                time: vector.time
            )
            var expected = vector.signed
            for (name, _) in vector.headers { expected[name] = nil }
            #expect(Dictionary(uniqueKeysWithValues: added.map { ($0.name, $0.value) }) == expected, "\(vector.name)")
        }
    }

    @Test func aQueryStringIsSignedInItsCanonicalForm() {
        #expect(SignatureV4.canonicalQuery("") == "")
        #expect(SignatureV4.canonicalQuery("b=2&a=1&a=0") == "a=0&a=1&b=2", "sorted by name, then value")
        #expect(SignatureV4.canonicalQuery("flag&x=") == "flag=&x=", "no value is an empty one")
        #expect(SignatureV4.canonicalQuery("t=%7e*&s=a b") == "s=a%20b&t=~%2A", "unreserved bytes plain, every other one %XX")
        #expect(SignatureV4.canonicalQuery("k=%2F%3d") == "k=%2F%3D")
    }

    @Test func theHashAndTheHMACMatchThePublishedVectors() {
        #expect(SHA256.hex(SHA256.hash(Array("".utf8))) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let twoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(SHA256.hex(SHA256.hash(Array(twoBlocks.utf8))) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            SHA256.hex(SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        )
        // RFC 4231, test cases 1 and 6 (a key longer than a block).
        #expect(
            SHA256.hex(SHA256.hmac(key: [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        )
        #expect(
            SHA256.hex(SHA256.hmac(key: [UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        )
    }

    @Test func timestampsAreUTC() {
        #expect(SignatureV4.timestamp(0) == ("19700101", "19700101T000000Z"))
        #expect(SignatureV4.timestamp(1_795_683_907) == ("20261126", "20261126T090507Z"))
        #expect(SignatureV4.timestamp(951_782_400) == ("20000229", "20000229T000000Z"))
        #expect(SignatureV4.timestamp(4_102_444_799) == ("20991231", "20991231T235959Z"))
    }

    @Test func theSharedCredentialsFile() {
        let text = """
            # comment
            [default]
            aws_access_key_id = AKIADEFAULT
            aws_secret_access_key=secret/default

            [ci]
            aws_access_key_id = AKIACI
            aws_secret_access_key = secret-ci
            aws_session_token = token-ci
            [broken]
            aws_access_key_id = AKIA
            """
        #expect(AWSCredentialsFile.credentials(in: text, profile: "default") == AWSCredentials(accessKeyID: "AKIADEFAULT", secretAccessKey: "secret/default"))
        #expect(
            AWSCredentialsFile.credentials(in: text, profile: "ci")
                == AWSCredentials(accessKeyID: "AKIACI", secretAccessKey: "secret-ci", sessionToken: "token-ci")
        )
        #expect(AWSCredentialsFile.credentials(in: text, profile: "broken") == nil)
        #expect(AWSCredentialsFile.credentials(in: text, profile: "absent") == nil)
    }
}
