import AWSSigning
import Foundation
import GQLMuxTestSupport
import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPFields
import NIOCore
import Testing
import Upstream

@testable import GQLMuxConfiguration

/// `transport = "appsync"` and `[upstream.appsync]`: what is derived, what is required, and the
/// values every connect and request is built from.
@Suite struct AppSyncConfigurationTests {
    private let apiHost = "abcdefghijklmnopqrstuvwxyz.appsync-api.eu-west-1.amazonaws.com"

    @Test func theRealTimeURLAndTheRegionAreDerivedFromTheGraphQLURL() throws {
        let c = try DaemonConfiguration.parse(
            "[upstream]\ntransport = \"appsync\"\nhttp_url = \"https://\(apiHost)/graphql\"\n[upstream.appsync]\nauth = \"api_key\"\napi_key_file = \"/k\"\n"
        )
        #expect(c.upstream.url.description == "wss://abcdefghijklmnopqrstuvwxyz.appsync-realtime-api.eu-west-1.amazonaws.com/graphql")
        #expect(c.upstream.appSync == AppSyncSettings(auth: .apiKey(file: "/k"), host: apiHost, region: "eu-west-1"))
        #expect(c.upstream.protocols == [.legacyWS])
        #expect(c.upstream.transport.dialect == .appSync)
        #expect(c.connections.maxOperationsPerConnection == 100, "AppSync's cap per connection")
        #expect(c.upstreamLayout.singlesOverHTTP, "queries and mutations go over HTTP")
        #expect(c.upstream.httpOperations?.appSync == c.upstream.appSync)
        #expect(c.upstream.httpStreams == nil)
    }

    @Test func aCustomDomainNamesItsRealTimeURLAndRegion() throws {
        let base = "[upstream]\ntransport = \"appsync\"\nhttp_url = \"https://api.example.com/graphql\"\n"
        let auth = "[upstream.appsync]\nauth = \"token\"\nauth_token_file = \"/t\"\nregion = \"us-east-2\"\n"
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(base + auth) }
        let c = try DaemonConfiguration.parse(base + "url = \"wss://api.example.com/graphql/realtime\"\nmax_operations_per_connection = 50\n" + auth)
        #expect(c.upstream.url.target == "/graphql/realtime")
        #expect(c.upstream.appSync == AppSyncSettings(auth: .token(file: "/t"), host: "api.example.com", region: "us-east-2"))
        #expect(c.connections.maxOperationsPerConnection == 50)
    }

    @Test func eachMistakeIsNamed() {
        let base = "[upstream]\ntransport = \"appsync\"\nhttp_url = \"https://\(apiHost)/graphql\"\n"
        let cases: [(String, String)] = [
            (base, "[upstream.appsync] auth: required"),
            (base + "[upstream.appsync]\n", "[upstream.appsync] auth: required"),
            (base + "[upstream.appsync]\nauth = \"api_key\"\n", "api_key_file: required"),
            (base + "[upstream.appsync]\nauth = \"token\"\napi_key_file = \"/k\"\n", "auth_token_file: required"),
            (base + "[upstream.appsync]\nauth = \"cookie\"\n", "not one of api_key, token, iam"),
            (base + "[upstream.appsync]\nauth = \"token\"\nauth_token_file = \"/t\"\nprofile = \"p\"\n", "only with auth = \"iam\""),
            (base + "[upstream.appsync]\nauth = \"token\"\nauth_token_file = \"/t\"\nkey = \"x\"\n", "unknown key"),
            ("[upstream]\ntransport = \"appsync\"\nurl = \"wss://h/graphql\"\n", "http_url: required"),
            ("[upstream]\nurl = \"wss://h/graphql\"\n[upstream.appsync]\nauth = \"api_key\"\napi_key_file = \"/k\"\n", "only with transport"),
            (base + "protocol = \"graphql-transport-ws\"\n[upstream.appsync]\nauth = \"api_key\"\napi_key_file = \"/k\"\n", "graphql-ws only"),
        ]
        for (text, expected) in cases {
            #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(text) }
            do {
                _ = try DaemonConfiguration.parse(text)
            } catch {
                #expect(error.description.contains(expected), "\(error.description) should name \(expected)")
            }
        }
    }

    @Test func perIdentityLanesTakeEachIdentitysOwnSecretAndNeverTheHosts() throws {
        let upstream = "[upstream]\nurl = \"ws://127.0.0.1:1/graphql\"\n"
        let base = "[upstreams.t]\ntransport = \"appsync\"\nhttp_url = \"https://\(apiHost)/graphql\"\n"
        let client = try DaemonConfiguration.parse(upstream + base + "identity = \"client\"\n[upstreams.t.appsync]\nauth = \"token\"\n")
        let entry = try #require(client.upstream(named: "t"))
        #expect(entry.upstream.appSync?.auth == .token(.identity))
        #expect(entry.identity == .client(forwardHeaders: ["authorization"]), "the token's header is forwarded by default")
        let keyed = try DaemonConfiguration.parse(upstream + base + "identity = \"client\"\n[upstreams.t.appsync]\nauth = \"api_key\"\n")
        #expect(keyed.upstream(named: "t")?.identity == .client(forwardHeaders: ["x-api-key"]))
        // A lane gets the app's own header's value, or a peer's file; never anything of the host's.
        let settings = try #require(keyed.upstream(named: "t")?.upstream)
        let app = LaneCredential(headers: [HeaderField(name: "X-Api-Key", value: "da2-app")]).applied(to: settings)
        #expect(app.appSync?.auth == .apiKey(.presented("da2-app")))
        #expect(LaneCredential().applied(to: settings).appSync?.auth == .apiKey(.identity))
        #expect(LaneCredential(payload: .file("/etc/gqlmux/alice.key")).applied(to: settings).appSync?.auth == .apiKey(.file("/etc/gqlmux/alice.key")))
        #expect(throws: (any Error).self) { try ConnectingPayloadReader.readAppSync(.apiKey(.identity)) }
        #expect(try ConnectingPayloadReader.readAppSync(.token(.presented(" eyJ.a.b "))) == .text("eyJ.a.b"))

        let cases: [(String, String)] = [
            (
                base + "identity = \"client\"\n[upstreams.t.appsync]\nauth = \"iam\"\ncredentials_file = \"/c\"\n",
                "[upstreams.t.appsync] auth = \"iam\" cannot be used with [upstreams.t] identity = \"client\""
            ),
            (
                base + "identity = \"peer\"\n[upstreams.t.peers]\n\"uid:1\" = \"/p\"\n[upstreams.t.appsync]\nauth = \"iam\"\n",
                "[upstreams.t.appsync] auth = \"iam\" cannot be used with [upstreams.t] identity = \"peer\""
            ),
            (
                base + "identity = \"client\"\n[upstreams.t.appsync]\nauth = \"token\"\nauth_token_file = \"/host\"\n",
                "[upstreams.t.appsync] auth_token_file: not with [upstreams.t] identity = \"client\""
            ),
            (
                base + "identity = \"client\"\nforward_headers = [\"authorization\"]\n[upstreams.t.appsync]\nauth = \"api_key\"\n",
                "forward_headers: must name 'x-api-key'"
            ),
        ]
        for (text, expected) in cases {
            do {
                _ = try DaemonConfiguration.parse(upstream + text)
                Issue.record("\(text) should fail")
            } catch {
                #expect(error.description.contains(expected), "\(error.description) should name \(expected)")
            }
        }
    }

    @Test func iamCredentialsComeFromWhereAWSToolsLook() throws {
        let base = "[upstream]\ntransport = \"appsync\"\nhttp_url = \"https://\(apiHost)/graphql\"\n[upstream.appsync]\nauth = \"iam\"\n"
        let keys = ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "TOKEN", "HOME": "/home/u"]
        let file = try DaemonConfiguration.parse(base + "credentials_file = \"/etc/gqlmux/aws\"\nprofile = \"ci\"\n", environment: keys)
        #expect(file.upstream.appSync?.auth == .iam(.file(path: "/etc/gqlmux/aws", profile: "ci")))
        #expect(file.upstream.appSync?.region == "eu-west-1")
        let environment = try DaemonConfiguration.parse(base, environment: keys)
        #expect(environment.upstream.appSync?.auth == .iam(.environment(AWSCredentials(accessKeyID: "AKID", secretAccessKey: "SECRET", sessionToken: "TOKEN"))))
        let home = try DaemonConfiguration.parse(base, environment: ["HOME": "/home/u", "AWS_PROFILE": "dev"])
        #expect(home.upstream.appSync?.auth == .iam(.file(path: "/home/u/.aws/credentials", profile: "dev")))
        let shared = try DaemonConfiguration.parse(base, environment: ["AWS_SHARED_CREDENTIALS_FILE": "/run/creds", "HOME": "/home/u"])
        #expect(shared.upstream.appSync?.auth == .iam(.file(path: "/run/creds", profile: "default")))
        for (text, environment, expected) in [
            (base, [String: String](), "credentials_file: required"),
            (base + "api_key_file = \"/k\"\n", keys, "not with auth = \"iam\""),
            (
                "[upstream]\ntransport = \"appsync\"\nhttp_url = \"https://api.example.com/graphql\"\nurl = \"wss://api.example.com/graphql/realtime\"\n[upstream.appsync]\nauth = \"iam\"\n",
                keys, "region: required"
            ),
        ] {
            do {
                _ = try DaemonConfiguration.parse(text, environment: environment)
                Issue.record("\(text) should fail")
            } catch {
                #expect(error.description.contains(expected), "\(error.description)")
            }
        }
    }

    @Test func iamAuthorizationIsSignedOverTheConnectAndEachStart() {
        let settings = AppSyncSettings(
            auth: .iam(.environment(AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))),
            host: apiHost,
            region: "eu-west-1"
        )
        let secret = AppSyncSettings.Secret.aws(
            AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
        )
        // The connect of Tests/Fixtures/sigv4-botocore.json, as gql sends it.
        let connect = settings.authorization(secret, path: "/graphql/connect", body: "{}", time: 1_795_683_907)
        #expect(connect.map(\.name) == ["accept", "content-encoding", "content-type", "X-Amz-Date", "Authorization", "host"])
        #expect(
            connect.first { $0.name == "Authorization" }?.value.hasSuffix("Signature=35b4aebf739bb847cd24906df835b7132fda94dec222c074af7b68bb27519163") == true
        )
        let http = settings.httpHeaders(secret, target: "/graphql", body: Array(#"{"query":"{ hello }"}"#.utf8), time: 1_795_683_907)
        #expect(
            http.first { $0.name == "Authorization" }?.value.hasSuffix("Signature=68aaa89943251c73e4167d0e0e8384e9f11e1e6a3d1facec7a35cece375165f8") == true
        )
    }

    @Test func theHeadersTheirJSONAndTheConnectQuery() {
        let settings = AppSyncSettings(auth: .apiKey(file: "/k"), host: "example.com")
        let headers = settings.headers(secret: "da2-1\"2")
        #expect(headers.map(\.name) == ["host", "x-api-key"])
        #expect(String(buffer: AppSyncSettings.json(headers)) == #"{"host":"example.com","x-api-key":"da2-1\"2"}"#)
        let query = AppSyncSettings.connectQuery(headers)
        #expect(query.hasSuffix("&payload=e30="))
        let encoded = String(query.dropFirst("header=".count).prefix { $0 != "&" })
        #expect(Data(base64Encoded: encoded).map { String(decoding: $0, as: UTF8.self) } == #"{"host":"example.com","x-api-key":"da2-1\"2"}"#)
        let token = AppSyncSettings(auth: .token(file: "/t"), host: "h:8443").headers(secret: "eyJ")
        #expect(token.map(\.name) == ["host", "Authorization"] && token[0].value == "h:8443")
    }

    @Test func aSecretFileHoldsOneLineOfHeaderText() {
        #expect(AppSyncSettings.secret(fromFile: "  da2-key\n") == "da2-key")
        #expect(AppSyncSettings.secret(fromFile: "\n") == nil)
        #expect(AppSyncSettings.secret(fromFile: "da2\r\nx-evil: 1") == nil, "no header injection")
        #expect(AppSyncSettings.region(inHost: apiHost) == "eu-west-1")
        #expect(AppSyncSettings.region(inHost: "api.example.com") == nil)
    }

    @Test func theShippedSamplesParse() throws {
        for name in ["appsync-api-key", "appsync-token", "appsync-iam", "appsync-identities"] {
            let path = repositoryRoot() + "/config/samples/\(name).toml"
            let c = try DaemonConfiguration.load(path: path)
            #expect(c.upstreams.allSatisfy { $0.name == "default" || $0.upstream.carrier == .appsync }, "\(name)")
        }
    }
}
