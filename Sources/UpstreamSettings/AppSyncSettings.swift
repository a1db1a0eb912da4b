import AWSSigning
import FoundationEssentials
import GraphQLTransportWS
import NIOCore

/// `[upstream.appsync]`: how gqlmuxd proves itself to an AWS AppSync API, as values. The secret
/// (an API key, a token) lives in a file read anew on every connect, so a rotated one needs no
/// restart (systemd credentials work: `LoadCredential=` and `%d/NAME`).
package struct AppSyncSettings: Sendable, Equatable {
    package enum Auth: Sendable, Equatable {
        /// `auth = "api_key"`: the `x-api-key` header, the key read from `api_key_file`, or the
        /// identity's own.
        case apiKey(SecretSource)
        /// `auth = "token"`: the `Authorization` header (a Cognito or OIDC token, a Lambda
        /// authorizer's token), read from `auth_token_file`, or the identity's own.
        case token(SecretSource)
        /// `auth = "iam"`: Signature Version 4 with AWS credentials (the host's only: never
        /// with `identity = "client"` or `"peer"`).
        case iam(IAMCredentials)

        /// `auth = "api_key"` with the key in `file`.
        package static func apiKey(file: String) -> Auth { .apiKey(.file(file)) }
        /// `auth = "token"` with the token in `file`.
        package static func token(file: String) -> Auth { .token(.file(file)) }

        /// The header an identity's key or token arrives in from its app (`x-api-key` or
        /// `authorization`, lowercased); nil for IAM.
        package var presentedHeader: String? {
            switch self {
            case .apiKey: "x-api-key"
            case .token: "authorization"
            case .iam: nil
            }
        }

        /// The same mode with its key or token from `source` (IAM is left as it is).
        package func with(_ source: SecretSource) -> Auth {
            switch self {
            case .apiKey: .apiKey(source)
            case .token: .token(source)
            case .iam: self
            }
        }
    }

    /// Where an API key or a token comes from.
    package enum SecretSource: Sendable, Equatable {
        /// A file read anew at every connect and request: the host's `api_key_file` or
        /// `auth_token_file`, or the file a peer's entry names (`identity = "peer"`).
        case file(String)
        /// What an app presented as its own (`identity = "client"`: its forwarded header).
        case presented(String)
        /// An upstream of per-identity lanes before a lane gives its own, or a lane whose app
        /// presented none: nothing goes out, and every connect and request fails saying so.
        case identity
    }

    /// Where `auth = "iam"` finds its credentials, as AWS's own tools look for them.
    package enum IAMCredentials: Sendable, Equatable {
        /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, read at start.
        case environment(AWSCredentials)
        /// A profile of a shared credentials file, read anew at every connect and request (a
        /// helper that refreshes temporary credentials rewrites it).
        case file(path: String, profile: String)
    }

    /// What a connect or a request read of the credentials.
    package enum Secret: Sendable, Equatable {
        /// An API key or a token.
        case text(String)
        case aws(AWSCredentials)
    }

    /// The headers AppSync's IAM authorization signs besides `host` (gql's, from the AWS guide).
    static let iamHeaders: [(name: String, value: String)] = [
        ("accept", "application/json, text/javascript"),
        ("content-encoding", "amz-1.0"),
        ("content-type", "application/json; charset=UTF-8"),
    ]

    package var auth: Auth
    /// AppSync's limit of subscriptions on one real-time connection: the default of
    /// `max_operations_per_connection` with this transport.
    package static let maxSubscriptionsPerConnection = 100
    /// The GraphQL API's host (with its port when not the default), the `host` every
    /// authorization names: the host of `http_url`, never the real-time one.
    package var host: String
    /// The AWS region (`region`, else parsed from the host); nil for a custom domain.
    package var region: String?

    package init(auth: Auth, host: String, region: String? = nil) {
        self.auth = auth
        self.host = host
        self.region = region
    }

    /// The authorization headers of a key or token, in order: `host`, then the credential
    /// (`x-api-key` with `auth = "api_key"`, else `Authorization`).
    package func headers(secret: String) -> [(name: String, value: String)] {
        if case .apiKey = auth { return [("host", host), ("x-api-key", secret)] }
        return [("host", host), ("Authorization", secret)]
    }

    /// The authorization of the real-time connect (`path` `/graphql/connect`, `body` `{}`) or
    /// of one `start` (`/graphql`, the request's JSON string): the key or token with `host`,
    /// or, for IAM, the request `POST https://HOST PATH` with `body` signed at `time` (seconds
    /// since 1970 UTC), as AppSync's guide and gql build it.
    package func authorization(_ secret: Secret, path: String, body: String, time: Int64) -> [(name: String, value: String)] {
        switch secret {
        case .text(let text):
            return headers(secret: text)
        case .aws(let credentials):
            let signed = SignatureV4.sign(
                host: host,
                path: path,
                headers: Self.iamHeaders,
                body: Array(body.utf8),
                service: "appsync",
                region: region ?? "",
                credentials: credentials,
                time: time
            )
            return Self.iamHeaders + signed + [("host", host)]
        }
    }

    /// The headers a query or mutation POSTed to `target` (a path, with its query string if
    /// any) with `body` adds to its own (whose `Host` is `host`): the key or token, or an IAM
    /// signature over `host`, the path, the query string and the date.
    package func httpHeaders(_ secret: Secret, target: String, body: [UInt8], time: Int64) -> [(name: String, value: String)] {
        switch secret {
        case .text(let text):
            return headers(secret: text).filter { $0.name != "host" }
        case .aws(let credentials):
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            return SignatureV4.sign(
                host: host,
                path: String(parts[0]),
                query: SignatureV4.canonicalQuery(parts.count > 1 ? String(parts[1]) : ""),
                body: body,
                service: "appsync",
                region: region ?? "",
                credentials: credentials,
                time: time
            )
        }
    }

    /// `headers` as the JSON object each `start` carries in `extensions.authorization`.
    package static func json(_ headers: [(name: String, value: String)]) -> ByteBuffer {
        var out = ByteBuffer()
        out.writeStaticString("{")
        for (index, header) in headers.enumerated() {
            if index > 0 { out.writeStaticString(",") }
            out.writeJSONString(header.name)
            out.writeStaticString(":")
            out.writeJSONString(header.value)
        }
        out.writeStaticString("}")
        return out
    }

    /// The real-time URL's query for `headers`: `header` is the base64 of their JSON object,
    /// `payload` the base64 of `{}`, as the AppSync documentation and its clients write them.
    package static func connectQuery(_ headers: [(name: String, value: String)]) -> String {
        "header=" + Data(json(headers).readableBytesView).base64EncodedString() + "&payload=e30="
    }

    /// The real-time URL AppSync serves for the GraphQL URL `http`: `appsync-api` becomes
    /// `appsync-realtime-api` and `https` `wss`; nil for a host that is not AppSync's own (a
    /// custom domain names its real-time URL itself).
    package static func realtimeURL(for http: HTTPURL) -> String? {
        var host = http.host
        guard let api = host.firstRange(of: ".appsync-api.") else { return nil }
        host.replaceSubrange(api, with: ".appsync-realtime-api.")
        let port = http.port == (http.secure ? 443 : 80) ? "" : ":\(http.port)"
        return (http.secure ? "wss://" : "ws://") + host + port + http.target
    }

    /// The region in an AppSync host (`ID.appsync-api.REGION.amazonaws.com`), if any.
    package static func region(inHost host: String) -> String? {
        let labels = host.split(separator: ".")
        guard let index = labels.firstIndex(where: { $0 == "appsync-api" || $0 == "appsync-realtime-api" }), index + 1 < labels.count else {
            return nil
        }
        return String(labels[index + 1])
    }

    /// A secret as read from its file: surrounding white space (a trailing newline) removed;
    /// nil when what is left is empty or holds a character no HTTP header may carry.
    package static func secret(fromFile text: String) -> String? {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return trimmed
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}
