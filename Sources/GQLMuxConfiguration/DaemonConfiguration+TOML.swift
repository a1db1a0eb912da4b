import AWSSigning
import FoundationEssentials
import GQLMuxVocabulary
import GraphQLTransportWS
import JSONEnvelope
import NIOCore
import RequestValidation
import TOMLKit
import UpstreamSettings

#if canImport(Glibc)
import Glibc
#endif

/// A configuration problem, naming the key and why: `[upstream] url: must start with ws:// or wss://`.
package struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    package var description: String
    init(_ description: String) { self.description = description }
}

extension DaemonConfiguration {
    /// Reads a TOML configuration file. Every key is checked: an unknown key, a wrong type
    /// or a bad value is an error that names the key; nothing starts half-configured.
    ///
    /// Keys (defaults in `config/gqlmuxd.toml`):
    /// - `[upstream]` url, headers, connecting_payload, connecting_payload_file, client_name,
    ///   client_version, operation_ids, lazy, lazy_close_timeout, reconnect_interval,
    ///   reconnect_max_interval, reconnect_multiplier, reconnect_jitter, reconnect_max_attempts,
    ///   reconnect_reset_after,
    ///   connect_timeout, connection_ack_timeout, ping_interval, pong_timeout, max_message_bytes,
    ///   reconnect_if_connected, operation_timeout, protocol, http_url, http_timeout,
    ///   max_operations_per_connection, max_connections
    /// - `[upstream.tls]` ca_file, insecure_skip_verify
    /// - `[socket]` path, mode
    /// - `[limits]` max_clients, max_operations_per_client, max_line_bytes, client_buffer_bytes,
    ///   total_buffer_bytes, max_document_tokens, max_document_depth
    /// - `[security]` allowed_uids, allowed_gids, admin_uids, admin_gids
    /// - `[subscriptions]` replay_last
    /// - `[graphql_endpoint]` (`DaemonConfiguration+Endpoint.swift`) socket, mode, listen, path,
    ///   allowed_hosts, allowed_origins, token_file, allow_all_local_users,
    ///   socket_max_connections, listen_max_connections
    /// - `[metrics]` listen
    /// - `[log]` level, target
    package static func load(path: String) throws(ConfigurationError) -> DaemonConfiguration {
        guard let file = fopen(path, "r") else {
            throw ConfigurationError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        fclose(file)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("cannot read \(path): not UTF-8 text")
        }
        return try parse(text, source: path)
    }

    /// - Parameter environment: where `https_proxy`, `http_proxy` and `no_proxy` are read when
    ///   `[upstream] proxy` is not set.
    package static func parse(
        _ text: String,
        source: String = "config",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> DaemonConfiguration {
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError("\(source): TOML syntax error at line \(error.source.begin.line): \(error.description)")
        } catch {
            throw ConfigurationError("\(source): \(error)")
        }
        let reader = TableReader(table: root, section: "")
        try reader.allowOnly(["upstream", "upstreams", "socket", "limits", "security", "log", "metrics", "graphql_endpoint", "subscriptions"])
        guard let upstreamTable = try reader.table("upstream") else {
            throw ConfigurationError("[upstream] url: required")
        }
        var configuration = DaemonConfiguration(upstream: try readUpstream(upstreamTable, environment: environment))
        configuration.upstreams[0] = try readNamed(NamedUpstream.defaultName, upstreamTable, configuration.upstream)
        if let table = try reader.table("upstreams") {
            for name in table.keys.sorted() {
                guard NamedUpstream.isValidName(name) else {
                    throw ConfigurationError("[upstreams.\(name)]: an upstream's name is 1 to 32 of a-z, 0-9, _ and -")
                }
                guard name != NamedUpstream.defaultName else {
                    throw ConfigurationError("[upstreams.default]: the upstream named default is [upstream]")
                }
                guard let entry = try table.table(name) else { continue }
                configuration.upstreams.append(try readNamed(name, entry, try readUpstream(entry, environment: environment)))
            }
        }
        if let socket = try reader.table("socket") {
            try socket.allowOnly(["path", "mode"])
            if let path = try socket.string("path") { configuration.socketPath = path }
            if let mode = try socket.string("mode") {
                guard let value = UInt32(mode, radix: 8), value <= 0o777 else {
                    throw ConfigurationError("[socket] mode: '\(mode)' is not an octal file mode like \"0660\"")
                }
                configuration.socketMode = value
            }
        }
        if let limits = try reader.table("limits") {
            try limits.allowOnly([
                "max_clients", "max_operations_per_client", "max_line_bytes", "client_buffer_bytes", "total_buffer_bytes",
                "max_document_tokens", "max_document_depth", "max_identities", "max_credential_bytes", "max_identities_per_uid",
            ])
            typealias R = ConfigurationRanges
            if let v = try limits.int("max_clients", in: R.maxClients) { configuration.limits.maxClients = v }
            if let v = try limits.int("max_operations_per_client", in: R.maxOperationsPerClient) { configuration.limits.maxOperationsPerClient = v }
            if let v = try limits.int("max_line_bytes", in: R.maxLineBytes) { configuration.limits.maxLineBytes = v }
            if let v = try limits.int("client_buffer_bytes", in: R.clientBufferBytes) { configuration.limits.clientBufferBytes = v }
            if let v = try limits.int("total_buffer_bytes", in: R.totalBufferBytes) { configuration.limits.totalBufferBytes = v }
            if let v = try limits.int("max_document_tokens", in: R.maxDocumentTokens) { configuration.limits.document.maxTokens = v }
            if let v = try limits.int("max_document_depth", in: R.maxDocumentDepth) { configuration.limits.document.maxDepth = v }
            if let v = try limits.int("max_identities", in: R.maxIdentities) { configuration.limits.maxIdentities = v }
            if let v = try limits.int("max_credential_bytes", in: R.maxCredentialBytes) { configuration.limits.maxCredentialBytes = v }
            if let v = try limits.int("max_identities_per_uid", in: R.maxIdentities) { configuration.limits.maxIdentitiesPerUID = v }
            guard configuration.limits.totalBufferBytes >= configuration.limits.clientBufferBytes else {
                throw ConfigurationError("[limits] total_buffer_bytes: must be at least client_buffer_bytes (\(configuration.limits.clientBufferBytes))")
            }
        }
        if let subscriptions = try reader.table("subscriptions") {
            try subscriptions.allowOnly(["replay_last"])
            if let v = try subscriptions.bool("replay_last") { configuration.replayLast = v }
        }
        if let security = try reader.table("security") {
            try security.allowOnly(["allowed_uids", "allowed_gids", "admin_uids", "admin_gids"])
            configuration.security.allowedUIDs = try security.ids("allowed_uids") ?? []
            configuration.security.allowedGIDs = try security.ids("allowed_gids") ?? []
            configuration.security.adminUIDs = try security.ids("admin_uids") ?? []
            configuration.security.adminGIDs = try security.ids("admin_gids") ?? []
        }
        if let endpoint = try reader.table("graphql_endpoint") {
            configuration.graphqlEndpoint = try GraphQLEndpointSettings.read(endpoint)
        }
        try configuration.checkEndpointAccess()
        try configuration.checkForwardedHeaders()
        if let metrics = try reader.table("metrics") {
            try metrics.allowOnly(["listen"])
            if let listen = try metrics.string("listen"), !listen.isEmpty {
                do {
                    configuration.metricsListen = try MetricsListenAddress(listen)
                } catch {
                    throw ConfigurationError("[metrics] listen: \(error)")
                }
            }
        }
        if let log = try reader.table("log") {
            try log.allowOnly(["level", "target"])
            if let level = try log.string("level") {
                let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
                guard levels.contains(level) else {
                    throw ConfigurationError("[log] level: '\(level)' is not one of \(levels.joined(separator: ", "))")
                }
                configuration.logLevel = level
            }
            if let target = try log.string("target") {
                guard let value = LogTarget(rawValue: target) else {
                    throw ConfigurationError("[log] target: '\(target)' is not one of auto, journal, stderr")
                }
                configuration.logTarget = value
            }
        }
        try checkCredentialRecordBound(configuration)
        return configuration
    }

    private static func readUpstream(_ t: TableReader, environment: [String: String]) throws(ConfigurationError) -> UpstreamConfiguration {
        let s = t.section
        try t.allowOnly([
            "url", "headers", "connecting_payload", "connecting_payload_file", "client_name", "client_version",
            "operation_ids", "lazy", "lazy_close_timeout", "reconnect_interval", "reconnect_max_interval",
            "reconnect_multiplier", "reconnect_jitter", "reconnect_max_attempts", "reconnect_reset_after", "connect_timeout",
            "connection_ack_timeout", "ping_interval", "pong_timeout", "max_message_bytes", "reconnect_if_connected", "tls",
            "protocol", "http_url", "http_timeout", "max_operations_per_connection", "max_connections", "operation_timeout",
            "transport", "multipart_accept", "heartbeat_timeout", "max_streams", "proxy", "appsync", "identity", "forward_headers", "peers",
            "header_files",
        ])
        var carrier = UpstreamCarrierKind.websocket
        if let name = try t.string("transport") {
            guard let kind = UpstreamCarrierKind(rawValue: name) else {
                throw ConfigurationError("[\(s)] transport: '\(name)' is not one of websocket, multipart, sse, appsync")
            }
            carrier = kind
        }
        var httpURL: HTTPURL?
        if let text = try t.string("http_url"), !text.isEmpty {
            do {
                httpURL = try HTTPURL(text)
            } catch {
                throw ConfigurationError("[\(s)] http_url: \(error)")
            }
        }
        let url: UpstreamURL
        switch (try t.string("url"), carrier, httpURL) {
        case (let text?, _, _):
            do {
                url = try UpstreamURL(text)
            } catch {
                throw ConfigurationError("[\(s)] url: \(error)")
            }
        case (nil, .websocket, _):
            throw ConfigurationError("[\(s)] url: required")
        case (nil, .appsync, let http?):
            guard let realtime = AppSyncSettings.realtimeURL(for: http) else {
                throw ConfigurationError(
                    "[\(s)] url: required with transport = \"appsync\" on a custom domain (its real-time URL, such as wss://DOMAIN/graphql/realtime)"
                )
            }
            do {
                url = try UpstreamURL(realtime)
            } catch {
                throw ConfigurationError("[\(s)] http_url: \(error)")
            }
        case (nil, _, nil):
            throw ConfigurationError("[\(s)] http_url: required with transport = \"\(carrier.rawValue)\"")
        case (nil, _, let http?):
            // Not used with an HTTP transport; kept so every configuration has one.
            do {
                url = try UpstreamURL((http.secure ? "wss://" : "ws://") + http.hostHeader + http.target)
            } catch {
                throw ConfigurationError("[\(s)] http_url: \(error)")
            }
        }
        if carrier != .websocket, httpURL == nil {
            throw ConfigurationError("[\(s)] http_url: required with transport = \"\(carrier.rawValue)\"")
        }
        var c = UpstreamConfiguration(url: url)
        c.carrier = carrier
        c.httpURL = httpURL
        let appSync = try t.table("appsync")
        if carrier == .appsync, let httpURL {
            guard let appSync else { throw ConfigurationError("[\(s).appsync] auth: required with transport = \"appsync\"") }
            c.appSync = try readAppSync(appSync, host: httpURL.hostHeader, identity: try t.string("identity") ?? "host", environment: environment)
            c.protocols = [.legacyWS]
            c.transport.dialect = .appSync
        } else if appSync != nil {
            throw ConfigurationError("[\(s).appsync]: only with transport = \"appsync\"")
        }
        if let accept = try t.string("multipart_accept") {
            guard !accept.isEmpty, !accept.contains("\r"), !accept.contains("\n") else {
                throw ConfigurationError("[\(s)] multipart_accept: not a valid Accept header")
            }
            c.multipartAccept = accept
        }
        if let headers = try t.table("headers") {
            for key in headers.keys {
                guard let value = try headers.string(key) else { continue }
                guard !key.isEmpty, key.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }),
                    !value.contains("\r"), !value.contains("\n")
                else { throw ConfigurationError("[\(s).headers] \(key): not a valid HTTP header") }
                c.headers.append((key, value))
            }
        }
        if let files = try t.table("header_files") {
            for key in files.keys {
                guard let path = try files.string(key) else { continue }
                guard !key.isEmpty, key.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }) else {
                    throw ConfigurationError("[\(s).header_files] \(key): not a valid HTTP header name")
                }
                guard path.hasPrefix("/") else {
                    throw ConfigurationError("[\(s).header_files] \(key): \(path) is not an absolute path")
                }
                guard !c.headers.contains(where: { $0.name.lowercased() == key.lowercased() }) else {
                    throw ConfigurationError("[\(s).header_files] \(key): also set in [\(s).headers]; set it in one of them")
                }
                c.headerFiles.append((key, path))
            }
        }
        let inline = try t.jsonObject("connecting_payload")
        let file = try t.string("connecting_payload_file")
        switch (inline, file) {
        case (.some, .some):
            throw ConfigurationError("[\(s)] connecting_payload and connecting_payload_file: set only one")
        case (.some(let json), nil): c.connectingPayload = .inline(ByteBuffer(bytes: json))
        case (nil, .some(let path)): c.connectingPayload = .file(path)
        case (nil, nil): break
        }
        c.clientName = try t.string("client_name")
        c.clientVersion = try t.string("client_version")
        if let name = try t.string("protocol"), carrier == .appsync {
            guard name == WireProtocol.legacyWS.rawValue else {
                throw ConfigurationError("[\(s)] protocol: AppSync speaks graphql-ws only")
            }
        } else if let name = try t.string("protocol") {
            switch name {
            case "auto": c.protocols = [.transportWS, .legacyWS]
            case WireProtocol.transportWS.rawValue: c.protocols = [.transportWS]
            case WireProtocol.legacyWS.rawValue: c.protocols = [.legacyWS]
            default:
                throw ConfigurationError("[\(s)] protocol: '\(name)' is not one of auto, graphql-transport-ws, graphql-ws")
            }
        }
        if let style = try t.string("operation_ids") {
            guard let value = OperationIDStyle(rawValue: style) else {
                throw ConfigurationError("[\(s)] operation_ids: '\(style)' is not \"sequential\" or \"uuid\"")
            }
            c.transport.operationIDs = value
        }
        if let v = try t.bool("lazy") { c.transport.lazy = v }
        typealias R = ConfigurationRanges
        if let v = try t.seconds("lazy_close_timeout", in: R.lazyCloseTimeout) { c.transport.lazyCloseTimeout = v }
        if let v = try t.number("reconnect_interval", in: R.reconnectInterval) {
            c.transport.backoff.initial = v < 0 ? nil : .seconds(double: v)
        }
        if let v = try t.seconds("reconnect_max_interval", in: R.reconnectMaxInterval) { c.transport.backoff.maximum = v }
        if let v = try t.number("reconnect_multiplier", in: R.reconnectMultiplier) { c.transport.backoff.multiplier = v }
        if let v = try t.number("reconnect_jitter", in: R.reconnectJitter) { c.transport.backoff.jitter = v }
        if let v = try t.int("reconnect_max_attempts", in: R.reconnectMaxAttempts) { c.transport.backoff.maxAttempts = v }
        if let v = try t.seconds("reconnect_reset_after", in: R.reconnectResetAfter) { c.transport.healthyAfter = v }
        if let v = try t.seconds("connect_timeout", in: R.timeout) { c.transport.connectTimeout = v }
        if let v = try t.seconds("connection_ack_timeout", in: R.timeout) { c.transport.ackTimeout = v }
        if let v = try t.seconds("ping_interval", in: R.pingInterval) { c.transport.pingInterval = v }
        if let v = try t.seconds("pong_timeout", in: R.timeout) { c.transport.pongTimeout = v }
        if let v = try t.seconds("operation_timeout", in: R.timeout) { c.transport.operationTimeout = v }
        if let v = try t.int("max_message_bytes", in: R.maxMessageBytes) { c.maxMessageBytes = v }
        if let v = try t.bool("reconnect_if_connected") { c.reconnectIfConnected = v }
        if let v = try t.seconds("heartbeat_timeout", in: R.timeout) { c.heartbeatTimeout = v }
        if let v = try t.int("max_streams", in: R.maxStreams) { c.maxStreams = v }
        let proxyText = try t.string("proxy")
        do throws(HTTPProxy.ParseError) {
            if let proxyText {
                c.proxy = proxyText.isEmpty ? .direct : .always(try HTTPProxy(parsing: proxyText))
            } else {
                c.proxy = try ProxyChoice.fromEnvironment(environment)
            }
        } catch {
            throw ConfigurationError("[\(s)] proxy: \(error.description)")
        }
        if let v = try t.seconds("http_timeout", in: R.timeout) { c.httpTimeout = v }
        if let tls = try t.table("tls") {
            try tls.allowOnly(["ca_file", "insecure_skip_verify"])
            c.tls.caFile = try tls.string("ca_file")
            c.tls.insecureSkipVerify = try tls.bool("insecure_skip_verify") ?? false
        }
        return c
    }

    /// The online restart carries each client's credential in its record (escaped, at most twice
    /// its size), which the next process reads up to 256 MiB: the credentials of every client the
    /// listeners may hold at once (line socket, endpoint socket, endpoint TCP port) take at most
    /// half of that.
    private static func checkCredentialRecordBound(_ configuration: DaemonConfiguration) throws(ConfigurationError) {
        // Credentials are kept only while some upstream has identity = "client".
        guard configuration.upstreams.contains(where: { if case .client = $0.identity { true } else { false } }) else { return }
        let endpoint = configuration.graphqlEndpoint
        let clients =
            configuration.limits.maxClients + (endpoint.socket == "" ? 0 : endpoint.socketMaxConnections)
            + (endpoint.listen == nil ? 0 : endpoint.listenMaxConnections)
        let limit = DaemonConfiguration.Limits.credentialRecordBytes / 2
        // Each client's latest credential, and one per identity for subscriptions made before
        // their client presented another.
        let held = clients + configuration.limits.maxIdentities
        guard held * configuration.limits.maxCredentialBytes <= limit else {
            throw ConfigurationError(
                "[limits] max_credential_bytes (\(configuration.limits.maxCredentialBytes)) × (the clients the listeners may hold (\(clients): max_clients, [graphql_endpoint] socket_max_connections and listen_max_connections) + max_identities (\(configuration.limits.maxIdentities))) could make an online restart's record too large: it may be at most \(limit)"
            )
        }
    }

    /// The pool limits and identity of upstream `name`, whose other keys `upstream` holds.
    private static func readNamed(_ name: String, _ t: TableReader, _ upstream: UpstreamConfiguration) throws(ConfigurationError) -> NamedUpstream {
        typealias R = ConfigurationRanges
        let s = t.section
        var entry = NamedUpstream(name: name, upstream: upstream)
        if let v = try t.int("max_operations_per_connection", in: R.maxOperationsPerConnection) {
            entry.connections.maxOperationsPerConnection = v
        } else if upstream.carrier == .appsync {
            // AppSync refuses a connection's 101st subscription (MaxSubscriptionsReachedError):
            // the pool opens another connection before that.
            entry.connections.maxOperationsPerConnection = AppSyncSettings.maxSubscriptionsPerConnection
        }
        if let v = try t.int("max_connections", in: R.maxConnections) { entry.connections.maxConnections = v }
        let forward = try t.strings("forward_headers")
        let peers = try t.table("peers")
        switch try t.string("identity") ?? "host" {
        case "host":
            entry.identity = .host
        case "client":
            var names: [String] = []
            // AppSync takes each app's own key or token from the header its mode names.
            let appSyncHeader = upstream.appSync?.auth.presentedHeader
            for header in forward ?? [appSyncHeader ?? "authorization"] {
                guard !header.isEmpty, header.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }) else {
                    throw ConfigurationError("[\(s)] forward_headers: '\(header)' is not an HTTP header name")
                }
                let lower = header.lowercased()
                guard
                    ![
                        "host", "connection", "upgrade", "content-length", "transfer-encoding", "sec-websocket-key", "sec-websocket-protocol",
                        "sec-websocket-version", "sec-websocket-extensions",
                    ].contains(lower)
                else {
                    throw ConfigurationError("[\(s)] forward_headers: '\(header)' belongs to the connection and cannot be forwarded")
                }
                if !names.contains(lower) { names.append(lower) }
            }
            if let appSyncHeader, !names.contains(appSyncHeader) {
                throw ConfigurationError(
                    "[\(s)] forward_headers: must name '\(appSyncHeader)' with [\(s).appsync] auth = \"\(appSyncHeader == "x-api-key" ? "api_key" : "token")\" and identity = \"client\" (AppSync reads each app's own there)"
                )
            }
            entry.identity = .client(forwardHeaders: names)
            // Nothing of the host's goes upstream in an app's name.
            if upstream.connectingPayload != .none {
                throw ConfigurationError("[\(s)] connecting_payload: not with identity = \"client\" (each app's own goes upstream)")
            }
            if let header = upstream.headers.first(where: { names.contains($0.name.lowercased()) }) {
                throw ConfigurationError("[\(s).headers] \(header.name): not with identity = \"client\", which forwards each app's own")
            }
            if let header = upstream.headerFiles.first(where: { names.contains($0.name.lowercased()) }) {
                throw ConfigurationError("[\(s).header_files] \(header.name): not with identity = \"client\", which forwards each app's own")
            }
        case "peer":
            guard let peers, !peers.keys.isEmpty else {
                throw ConfigurationError("[\(s).peers]: required with identity = \"peer\" (\"uid:1001\" = \"/etc/gqlmux/alice.json\")")
            }
            var table = PeerPayloads()
            for key in peers.keys {
                guard let path = try peers.string(key), !path.isEmpty else {
                    throw ConfigurationError("[\(s).peers] \(key): expected the path of a connecting payload file")
                }
                let parts = key.split(separator: ":", maxSplits: 1)
                // One spelling per number: "uid:01" and "uid:1" would name one user twice.
                guard parts.count == 2, let id = UInt32(parts[1]), String(id) == parts[1] else {
                    throw ConfigurationError("[\(s).peers] \(key): expected \"uid:NUMBER\" or \"gid:NUMBER\" (a number without leading zeros or sign)")
                }
                switch parts[0] {
                case "uid": table.byUID[id] = path
                case "gid": table.byGID[id] = path
                default: throw ConfigurationError("[\(s).peers] \(key): expected \"uid:NUMBER\" or \"gid:NUMBER\"")
                }
            }
            entry.identity = .peer(table)
        case let other:
            throw ConfigurationError("[\(s)] identity: '\(other)' is not one of host, client, peer")
        }
        if forward != nil, case .host = entry.identity {
            throw ConfigurationError("[\(s)] forward_headers: only with identity = \"client\"")
        }
        if forward != nil, case .peer = entry.identity {
            throw ConfigurationError("[\(s)] forward_headers: only with identity = \"client\"")
        }
        if peers != nil, entry.identity.name != "peer" {
            throw ConfigurationError("[\(s).peers]: only with identity = \"peer\"")
        }
        return entry
    }

    /// `[upstream.appsync]`: the authorization mode, its secret's file, the region. IAM
    /// credentials come from `credentials_file` (with `profile`), else `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), else the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`), its profile `profile`, else
    /// `AWS_PROFILE`, else `default`: where AWS's own tools look.
    ///
    /// With `identity` other than `"host"`, each lane sends its own key or token (an app's
    /// forwarded header, a peer's file), so the host's files are refused, and IAM (which can
    /// only sign with the host's AWS credentials) is refused naming both keys.
    private static func readAppSync(
        _ t: TableReader,
        host: String,
        identity: String,
        environment: [String: String]
    ) throws(ConfigurationError) -> AppSyncSettings {
        let s = t.section
        let parent = String(s.dropLast(".appsync".count))
        try t.allowOnly(["auth", "api_key_file", "auth_token_file", "credentials_file", "profile", "region"])
        func source(_ key: String, for mode: String) throws(ConfigurationError) -> AppSyncSettings.SecretSource {
            guard identity == "host" else {
                if try t.string(key) != nil {
                    throw ConfigurationError(
                        "[\(s)] \(key): not with [\(parent)] identity = \"\(identity)\" (each identity's own \(mode == "api_key" ? "key" : "token") goes upstream, never the host's)"
                    )
                }
                return .identity
            }
            guard let path = try t.string(key), !path.isEmpty else {
                throw ConfigurationError("[\(s)] \(key): required with auth = \"\(mode)\"")
            }
            return .file(path)
        }
        let auth: AppSyncSettings.Auth
        switch try t.string("auth") {
        case "api_key": auth = .apiKey(try source("api_key_file", for: "api_key"))
        case "token": auth = .token(try source("auth_token_file", for: "token"))
        case "iam" where identity != "host":
            throw ConfigurationError(
                "[\(s)] auth = \"iam\" cannot be used with [\(parent)] identity = \"\(identity)\": IAM signs with the host's AWS credentials only; use auth = \"token\" or \"api_key\""
            )
        case "iam":
            let profile = try t.string("profile") ?? environment["AWS_PROFILE"] ?? "default"
            if let file = try t.string("credentials_file") {
                auth = .iam(.file(path: file, profile: profile))
            } else if let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty, let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty {
                let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
                auth = .iam(.environment(AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token)))
            } else if let file = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? environment["HOME"].map({ $0 + "/.aws/credentials" }) {
                auth = .iam(.file(path: file, profile: profile))
            } else {
                throw ConfigurationError(
                    "[\(s)] credentials_file: required with auth = \"iam\" when neither AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY nor HOME is set"
                )
            }
        case let other?:
            throw ConfigurationError("[\(s)] auth: '\(other)' is not one of api_key, token, iam")
        case nil:
            throw ConfigurationError("[\(s)] auth: required (api_key, token or iam)")
        }
        if case .iam = auth {
            for key in ["api_key_file", "auth_token_file"] where try t.string(key) != nil {
                throw ConfigurationError("[\(s)] \(key): not with auth = \"iam\"")
            }
        } else {
            for key in ["credentials_file", "profile"] where try t.string(key) != nil {
                throw ConfigurationError("[\(s)] \(key): only with auth = \"iam\"")
            }
        }
        let region = try t.string("region") ?? AppSyncSettings.region(inHost: host)
        if case .iam = auth, region == nil {
            throw ConfigurationError("[\(s)] region: required with auth = \"iam\" when the host does not name it")
        }
        return AppSyncSettings(auth: auth, host: host, region: region)
    }
}

/// Typed, key-checked access to one TOML table.
struct TableReader {
    let table: TOMLTable
    let section: String

    var keys: [String] { table.keys }

    private func name(_ key: String) -> String { section.isEmpty ? "[\(key)]" : "[\(section)] \(key)" }

    func allowOnly(_ allowed: Set<String>) throws(ConfigurationError) {
        for key in table.keys where !allowed.contains(key) {
            throw ConfigurationError("\(name(key)): unknown key (known: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    private func value(_ key: String, _ expected: String) -> (any TOMLValueConvertible)? { table[key] }

    func table(_ key: String) throws(ConfigurationError) -> TableReader? {
        guard let v = table[key] else { return nil }
        guard let t = v.table else { throw ConfigurationError("\(name(key)): expected a table") }
        return TableReader(table: t, section: section.isEmpty ? key : "\(section).\(key)")
    }

    func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let v = table[key] else { return nil }
        guard let s = v.string else { throw ConfigurationError("\(name(key)): expected a string, found \(v.type)") }
        return s
    }

    func bool(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let v = table[key] else { return nil }
        guard let b = v.bool else { throw ConfigurationError("\(name(key)): expected true or false, found \(v.type)") }
        return b
    }

    func int(_ key: String) throws(ConfigurationError) -> Int? {
        guard let v = table[key] else { return nil }
        guard v.type == .int, let i = v.int else { throw ConfigurationError("\(name(key)): expected an integer, found \(v.type)") }
        return i
    }

    /// An integer within `range` (documented next to the key in config/gqlmuxd.toml).
    func int(_ key: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let i = try int(key) else { return nil }
        guard range.contains(i) else {
            throw ConfigurationError("\(name(key)): \(i) is out of range (\(range.lowerBound) to \(range.upperBound))")
        }
        return i
    }

    /// A finite number within `range`; NaN and infinities are refused.
    func number(_ key: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double? {
        guard let n = try number(key) else { return nil }
        guard n.isFinite, range.contains(n) else {
            throw ConfigurationError("\(name(key)): \(n) is out of range (\(Self.format(range.lowerBound)) to \(Self.format(range.upperBound)))")
        }
        return n
    }

    /// Seconds within `range` (a lower bound above zero refuses zero).
    func seconds(_ key: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Duration? {
        guard let n = try number(key, in: range) else { return nil }
        return .seconds(double: n)
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    func number(_ key: String) throws(ConfigurationError) -> Double? {
        guard let v = table[key] else { return nil }
        if v.type == .int, let i = v.int { return Double(i) }
        if v.type == .double, let d = v.double { return d }
        throw ConfigurationError("\(name(key)): expected a number, found \(v.type)")
    }

    func strings(_ key: String) throws(ConfigurationError) -> [String]? {
        guard let v = table[key] else { return nil }
        guard let array = v.array else { throw ConfigurationError("\(name(key)): expected an array of strings") }
        var strings: [String] = []
        for element in array {
            guard let string = element.string else { throw ConfigurationError("\(name(key)): expected an array of strings") }
            strings.append(string)
        }
        return strings
    }

    func ids(_ key: String) throws(ConfigurationError) -> [UInt32]? {
        guard let v = table[key] else { return nil }
        guard let array = v.array else { throw ConfigurationError("\(name(key)): expected an array of numeric ids") }
        var ids: [UInt32] = []
        for element in array {
            guard element.type == .int, let i = element.int, let id = UInt32(exactly: i) else {
                throw ConfigurationError("\(name(key)): expected an array of numeric ids")
            }
            ids.append(id)
        }
        return ids
    }

    /// A table value encoded as a JSON object (keys sorted, so the text does not depend on the
    /// file's order).
    func jsonObject(_ key: String) throws(ConfigurationError) -> [UInt8]? {
        guard let v = table[key] else { return nil }
        guard v.table != nil else { throw ConfigurationError("\(name(key)): expected a table (it is sent as a JSON object)") }
        var out = ""
        do {
            try Self.writeJSON(v, to: &out)
        } catch {
            throw ConfigurationError("\(name(key)): cannot be encoded as JSON (\(error.description))")
        }
        return Array(out.utf8)
    }

    private static func writeJSON(_ value: any TOMLValueConvertible, to out: inout String) throws(ConfigurationError) {
        switch value.type {
        case .table:
            out += "{"
            for (n, (k, v)) in value.table!.sorted(by: { $0.0 < $1.0 }).enumerated() {
                if n > 0 { out += "," }
                out += jsonString(k) + ":"
                try writeJSON(v, to: &out)
            }
            out += "}"
        case .array:
            out += "["
            for (n, v) in value.array!.enumerated() {
                if n > 0 { out += "," }
                try writeJSON(v, to: &out)
            }
            out += "]"
        case .string: out += jsonString(value.string!)
        case .int: out += String(value.int!)
        case .double:
            let d = value.double!
            guard d.isFinite else { throw ConfigurationError("\(d) is not a JSON number") }
            out += d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .bool: out += value.bool! ? "true" : "false"
        default: throw ConfigurationError("dates are not supported")
        }
    }
}

/// The accepted range of every numeric key, checked at parse time (start and reload), so no
/// value can overflow a conversion or a precondition later. Mirrored in config/gqlmuxd.toml.
enum ConfigurationRanges {
    static let lazyCloseTimeout = 0.0...86_400
    /// Negative disables reconnection; NaN and infinities are refused.
    static let reconnectInterval = -1.0...3_600
    static let reconnectMaxInterval = 0.001...86_400
    static let reconnectMultiplier = 1.0...100
    static let reconnectJitter = 0.0...1
    static let reconnectMaxAttempts = 0...1_000_000
    static let reconnectResetAfter = 0.0...86_400
    static let timeout = 0.001...3_600
    static let pingInterval = 0.0...3_600
    static let maxMessageBytes = 1_024...(1 << 30)
    static let maxOperationsPerConnection = 0...1_000_000
    static let maxConnections = 1...64
    static let maxStreams = 1...100_000
    static let maxClients = 1...65_536
    static let endpointConnections = 1...65_536
    static let maxOperationsPerClient = 1...1_000_000
    static let maxLineBytes = 256...(64 << 20)
    static let clientBufferBytes = 4_096...(1 << 30)
    static let totalBufferBytes = 65_536...(64 << 30)
    static let maxDocumentTokens = 1...1_000_000
    static let maxDocumentDepth = 1...SubscribeRequest.Limits.maxAllowedDepth
    static let maxIdentities = 1...100_000
    static let maxCredentialBytes = 64...(1 << 20)
}
