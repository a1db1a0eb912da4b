import LocalEndpoint

#if canImport(Glibc)
import Glibc
#endif

extension GraphQLEndpointSettings {
    /// `[graphql_endpoint]`: socket, mode, listen, path, allowed_hosts, allowed_origins,
    /// token_file, allow_all_local_users, socket_max_connections, listen_max_connections.
    static func read(_ endpoint: TableReader) throws(ConfigurationError) -> GraphQLEndpointSettings {
        typealias R = ConfigurationRanges
        try endpoint.allowOnly([
            "socket", "mode", "listen", "path", "allowed_hosts", "allowed_origins", "token_file", "allow_all_local_users",
            "socket_max_connections", "listen_max_connections",
        ])
        var settings = GraphQLEndpointSettings()
        if let socket = try endpoint.string("socket") { settings.socket = socket }
        if let mode = try endpoint.string("mode") {
            guard let value = UInt32(mode, radix: 8), value <= 0o777 else {
                throw ConfigurationError("[graphql_endpoint] mode: '\(mode)' is not an octal file mode like \"0660\"")
            }
            settings.mode = value
        }
        if let listen = try endpoint.string("listen"), !listen.isEmpty {
            let address: MetricsListenAddress
            do {
                address = try MetricsListenAddress(listen)
            } catch {
                throw ConfigurationError("[graphql_endpoint] listen: \(error)")
            }
            guard isLoopback(address.host) else {
                throw ConfigurationError(
                    "[graphql_endpoint] listen: '\(listen)' is not a loopback address (127.0.0.0/8, ::1, localhost); the endpoint never listens beyond this host"
                )
            }
            settings.listen = address
        }
        if let path = try endpoint.string("path") {
            guard path.hasPrefix("/"), !path.contains("?"), !path.contains(" ") else {
                throw ConfigurationError("[graphql_endpoint] path: '\(path)' must start with / and hold no query")
            }
            settings.path = path
        }
        for host in try endpoint.strings("allowed_hosts") ?? [] {
            guard let parsed = EndpointAccess.parseHost(host), !parsed.name.isEmpty else {
                throw ConfigurationError("[graphql_endpoint] allowed_hosts: '\(host)' is not a host name, optionally with :port")
            }
            settings.access.allowedHosts.append(parsed.name + (parsed.port.map { ":" + $0 } ?? ""))
        }
        for origin in try endpoint.strings("allowed_origins") ?? [] {
            guard let normalized = EndpointAccess.normalizeOrigin(origin) else {
                throw ConfigurationError(
                    "[graphql_endpoint] allowed_origins: '\(origin)' is not an origin like \"https://app.example:8443\" (scheme, host and port only; \"null\" and \"*\" are never allowed)"
                )
            }
            settings.access.allowedOrigins.append(normalized)
        }
        if let file = try endpoint.string("token_file"), !file.isEmpty {
            settings.tokenFile = file
            settings.token = try readToken(file)
        }
        settings.allowAllLocalUsers = try endpoint.bool("allow_all_local_users") ?? false
        if let v = try endpoint.int("socket_max_connections", in: R.endpointConnections) { settings.socketMaxConnections = v }
        if let v = try endpoint.int("listen_max_connections", in: R.endpointConnections) { settings.listenMaxConnections = v }
        return settings
    }

    /// Reads the TCP port's token: a file only its owner can read, holding one token of at
    /// least 16 printable characters.
    static func readToken(_ path: String) throws(ConfigurationError) -> EndpointToken {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ConfigurationError("[graphql_endpoint] token_file: cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o007 == 0 else {
            throw ConfigurationError(
                "[graphql_endpoint] token_file: \(path) can be read by every user (mode \(String(info.st_mode & 0o777, radix: 8))); chmod o-rwx it"
            )
        }
        guard let file = fopen(path, "r") else {
            throw ConfigurationError("[graphql_endpoint] token_file: cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= 4096 {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        guard bytes.count <= 4096, let token = EndpointToken(fileContents: String(decoding: bytes, as: UTF8.self)) else {
            throw ConfigurationError(
                "[graphql_endpoint] token_file: \(path) must hold one token of \(EndpointToken.minimumLength) to 4096 printable ASCII characters (for example: head -c 32 /dev/urandom | base64)"
            )
        }
        return token
    }
}

extension DaemonConfiguration {
    /// `listen` serves every local user, since TCP carries no peer credentials. When
    /// `[security] allowed_uids`/`allowed_gids` restrict who may use gqlmuxd, that would quietly
    /// let an excluded user in; the operator must choose a token or say so explicitly.
    func checkEndpointAccess() throws(ConfigurationError) {
        guard graphqlEndpoint.listen != nil, !security.allowedUIDs.isEmpty || !security.allowedGIDs.isEmpty,
            graphqlEndpoint.token == nil, !graphqlEndpoint.allowAllLocalUsers
        else { return }
        throw ConfigurationError(
            "[graphql_endpoint] listen: every local user can reach a TCP port, but [security] allowed_uids/allowed_gids restrict gqlmuxd to some; either set [graphql_endpoint] token_file (TCP clients must then present its token) or set [graphql_endpoint] allow_all_local_users = true to accept that every local user may use the endpoint"
        )
    }
}
