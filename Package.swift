// swift-tools-version:6.0
import Foundation
import PackageDescription

/// `scripts/fuzz.sh` builds with GQLMUX_FUZZ_INSTRUMENTED=1, in release: our modules for
/// libFuzzer (coverage and AddressSanitizer; unoptimised, so assertions and exclusivity checks
/// hold; `DEBUG` is not defined, as in any release build, which leaves out only the test fault
/// hooks of GQLMuxDaemon, a module no harness links), the dependencies as the release build
/// makes them, so in CI the fuzz build reuses the package's and compiles only our modules. The
/// price: SwiftNIO's own debug assertions are not in the fuzzed binaries (the seed corpus still
/// replays through them in `swift test`, a debug build).
let fuzzInstrumented = ProcessInfo.processInfo.environment["GQLMUX_FUZZ_INSTRUMENTED"] == "1"

/// Every target of ours. `.ci/run` sets GQLMUX_WARNINGS_AS_ERRORS=1 so a warning fails the
/// build (only our modules: the dependencies' warnings are not ours to fix).
let strict: [SwiftSetting] =
    [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
    + (ProcessInfo.processInfo.environment["GQLMUX_WARNINGS_AS_ERRORS"] == "1" ? [.unsafeFlags(["-warnings-as-errors"])] : [])
    + (fuzzInstrumented ? [.unsafeFlags(["-Onone", "-enforce-exclusivity=checked", "-sanitize=fuzzer,address"])] : [])

/// The hot path's module, ResultDelivery, only (the fan-out, the result writers, shared frames,
/// result bytes: the one home of the hot path's raw pointers; the socket syscalls are SystemdSupport's). In release builds Swift's dynamic
/// exclusivity checks (a begin/end access pair, through thread-local storage, on every class
/// property touched per delivery, in the writer's `writeNext` and the fan-out's deliveries)
/// cost gqlmuxd 11-36 % of its fan-out rate (best against best, median against median);
/// turning them off in the other hot-path modules too (the wire core, Upstream, Multiplexing)
/// gained nothing measurable (`scripts/exclusivity-ab.sh` and its variants). Every other module,
/// the daemon's control plane, sessions and handover included, keeps Swift's checks. Debug
/// builds (every test) and the fuzz build keep them here too. `GQLMUX_EXCLUSIVITY_CHECKED=1`
/// keeps them in release as well, for that A/B.
let hotPath: [SwiftSetting] =
    strict
    + (ProcessInfo.processInfo.environment["GQLMUX_EXCLUSIVITY_CHECKED"] == "1" || fuzzInstrumented
        ? [] : [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))])

let package = Package(
    name: "gqlmux",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "gqlmuxd", targets: ["gqlmuxd"]),
        .executable(name: "gqlmuxctl", targets: ["gqlmuxctl"]),
        .library(name: "GQLMuxClient", targets: ["GQLMuxClient"]),
        .executable(name: "gqlmux-test-upstream", targets: ["gqlmux-test-upstream"]),
        .executable(name: "gqlmux-bench", targets: ["gqlmux-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // HTTP/2 for the HTTP streaming upstreams (every stream on one connection when the
        // server offers h2). Chosen over async-http-client, which brings it and more.
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/GraphQLSwift/GraphQL", from: "4.3.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Metrics (docs/metrics.md): swift-prometheus's registry writes the text exposition
        // (it brings swift-metrics and swift-atomics; pure Swift, seconds on a cold build).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // gqlmuxd's lifecycle: graceful shutdown on SIGTERM/SIGINT with a deadline, SIGHUP read
        // as an async sequence (brings swift-async-algorithms; pure Swift).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // SHA-256 and HMAC for AWS Signature Version 4 and for naming identities: an audited
        // implementation (BoringSSL underneath) rather than our own. It costs about two minutes
        // of a cold build on two cores (its own copy of BoringSSL's C sources).
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // The validating JSON scanner and the {type, id, payload} envelope both wire protocols use
        // (upstream and local). ByteBuffer only.
        .target(
            name: "JSONEnvelope",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // One HTTP header field (name and value) and a trimming helper (HTTP's optional whitespace
        // by default): what the endpoint, the upstream settings and transports, presented
        // credentials, the handover record and the daemon share. Pure.
        .target(name: "HTTPFields", swiftSettings: strict),
        // The shared vocabulary of every side (operation ids, kinds, states and updates, the
        // connection's state and events, close codes, disconnect causes, backoff, the clock's
        // instants, the subprotocol names). NIOCore for ByteBuffer only.
        .target(
            name: "GQLMuxVocabulary",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // Pure graphql-transport-ws / graphql-ws core: messages, state machine.
        // Depends on NIOCore for ByteBuffer only; no sockets, no Task, clock injected.
        .target(
            name: "GraphQLTransportWS",
            dependencies: ["GQLMuxVocabulary", "JSONEnvelope", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // Pure HTTP streaming core: multipart and SSE parsers (bytes in, events out) and the
        // stream lifecycle machine (clock injected).
        .target(
            name: "HTTPStreaming",
            dependencies: ["GQLMuxVocabulary", "JSONEnvelope", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // The upstream's settings as values: URLs, TLS and proxy choices, timings, the carrier
        // kind. What the configuration reads and checks, with no I/O module behind it.
        // AWS Signature Version 4 (AppSync's IAM authorization), pure, over swift-crypto's SHA-256
        // and HMAC.
        .target(name: "AWSSigning", dependencies: [.product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .target(
            name: "UpstreamSettings",
            dependencies: ["HTTPFields", "AWSSigning", "GQLMuxVocabulary", "GraphQLTransportWS", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // The upstream WebSocket transport on SwiftNIO, driven by the state machine.
        // An upstream WebSocket's frame handler: bytes read → messages → its transport, with
        // reading and acting apart (a write that reads again never re-enters a read). Its own
        // module, on NIOCore and NIOWebSocket only, so the fuzzer drives it through a channel.
        .target(
            name: "UpstreamFrames",
            dependencies: [
                "GQLMuxVocabulary", "GraphQLTransportWS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Upstream",
            dependencies: [
                "HTTPFields",
                "AWSSigning", "GQLMuxVocabulary", "GraphQLTransportWS", "HTTPStreaming", "UpstreamFrames", "UpstreamSettings",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Local protocol v1: line framing and encoders, shared by the daemon and the client library.
        .target(
            name: "LocalProtocol",
            dependencies: ["JSONEnvelope", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // Local subscribe payloads checked before anything acts on them: document bounds
        // (before the recursive parser), our own GraphQL syntax check (executable documents),
        // operation type, dedup key.
        .target(
            name: "RequestValidation",
            dependencies: [
                "HTTPFields",
                "GQLMuxVocabulary", "LocalProtocol", "JSONEnvelope",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The local GraphQL endpoint's pure core: GraphQL-over-WebSocket (both subprotocols, as
        // a server) and GraphQL over HTTP translated to and from the local protocol.
        .target(
            name: "LocalEndpoint",
            dependencies: ["HTTPFields", "GQLMuxVocabulary", "JSONEnvelope", "LocalProtocol", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // The endpoint's NIO handlers: GraphQL over HTTP (JSON, SSE, multipart) and over
        // WebSocket (both subprotocols) in front of a session, the inbound meters of the memory
        // budget; the pure translation they drive is LocalEndpoint.
        .target(
            name: "EndpointServer",
            dependencies: [
                "HTTPFields",
                "GQLMuxVocabulary", "Handover", "LocalEndpoint", "LocalProtocol", "RequestValidation",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // What a restarting gqlmuxd leaves the next process beside its clients' connections in
        // systemd's file descriptor store: a versioned, checksummed record. Pure.
        .target(
            name: "Handover",
            dependencies: ["HTTPFields", "GQLMuxVocabulary", "JSONEnvelope", "LocalProtocol", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // The pure multiplexer core: the one registry of operations (dedup, reference counts,
        // subscribers, states); events in, actions out.
        .target(
            name: "Multiplexing",
            dependencies: ["GQLMuxVocabulary", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // gqlmuxd's configuration: the TOML file read and checked, and a reload prepared (its
        // file I/O done) before the daemon applies it. Kept out of the serving modules.
        .target(
            name: "GQLMuxConfiguration",
            dependencies: [
                "AWSSigning", "GQLMuxVocabulary", "GraphQLTransportWS", "UpstreamSettings", "RequestValidation", "JSONEnvelope", "LocalEndpoint",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            swiftSettings: strict
        ),
        // The hot path: results to their subscribers' sockets, framed once, batched per client.
        .target(
            name: "ResultDelivery",
            dependencies: [
                "GQLMuxVocabulary", "LocalProtocol", "LocalEndpoint", "Multiplexing",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: hotPath
        ),
        // The daemon: Unix socket server, sessions, the control plane, the handover.
        .target(
            name: "GQLMuxDaemon",
            dependencies: [
                "HTTPFields", "ResultDelivery",
                "GQLMuxConfiguration", "GQLMuxVocabulary", "GraphQLTransportWS", "Upstream", "LocalProtocol", "RequestValidation", "Multiplexing",
                "CMallocTuning", "LocalEndpoint", "EndpointServer", "Handover", "JSONEnvelope", "SystemdSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // glibc's malloc tuning (mallopt, malloc_trim), which the Glibc module does not export.
        .target(name: "CMallocTuning"),
        // libsystemd (Debian libsystemd-dev): sd_notify, listen fds, journald.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(
            name: "SystemdSupport",
            dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "gqlmuxd",
            dependencies: [
                "GQLMuxDaemon", "GQLMuxConfiguration", "SystemdSupport", "GQLMuxCtlCommand",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // The Swift client library's core: async/await over local protocol v1, without
        // Foundation (FoundationEssentials at most), so gqlmuxctl links none.
        .target(
            name: "GQLMuxClientCore",
            dependencies: [
                "LocalProtocol", "JSONEnvelope",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The client library product: the core re-exported, plus its Foundation conveniences
        // (variables as a dictionary, results as `[String: Any]`).
        .target(
            name: "GQLMuxClient",
            dependencies: ["GQLMuxClientCore", "LocalProtocol"],
            swiftSettings: strict
        ),
        // gqlmuxctl's commands, linked into both gqlmuxctl and gqlmuxd (which runs them when
        // started under the name gqlmuxctl: the package ships one binary).
        .target(
            name: "GQLMuxCtlCommand",
            dependencies: [
                "GQLMuxClientCore", "LocalProtocol", "JSONEnvelope", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "gqlmuxctl",
            dependencies: ["GQLMuxCtlCommand"],
            swiftSettings: strict
        ),
        // In-process graphql-transport-ws server for tests and the demo.
        .target(
            name: "TestUpstream",
            dependencies: [
                "GQLMuxVocabulary", "GraphQLTransportWS", "Spawn",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // Benchmark report program (scripts/bench.sh), not a test.
        .executableTarget(
            name: "gqlmux-bench",
            dependencies: [
                "TestUpstream", "Upstream", "GQLMuxVocabulary", "GraphQLTransportWS", "Spawn",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Measures the GraphQL parser's stack and time per document (scripts/parse-probe.sh).
        .executableTarget(
            name: "gqlmux-parse-probe",
            dependencies: [
                "RequestValidation",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "GraphQL", package: "GraphQL"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "gqlmux-test-upstream",
            dependencies: ["TestUpstream"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "GQLMuxDaemonTests",
            dependencies: [
                "HTTPFields", "ResultDelivery",
                "GQLMuxDaemon", "GQLMuxClient", "LocalProtocol", "TestUpstream", "Upstream", "GQLMuxVocabulary", "GraphQLTransportWS",
                "RequestValidation",
                "LocalEndpoint", "EndpointServer", "GQLMuxConfiguration", "SystemdSupport", "GQLMuxTestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Bodies of the libFuzzer targets (Fuzz/, scripts/fuzz.sh); GQLMuxFuzzTests replays their corpus.
        .target(
            name: "GQLMuxFuzz",
            dependencies: [
                "HTTPFields",
                "Handover",
                "GQLMuxVocabulary", "GraphQLTransportWS", "LocalProtocol", "RequestValidation", "HTTPStreaming", "JSONEnvelope", "LocalEndpoint",
                "UpstreamFrames",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Helpers shared by the test targets.
        .target(name: "GQLMuxTestSupport", dependencies: ["Spawn", "TestUpstream"], swiftSettings: strict),
        // Child processes without Foundation's Process (posix_spawn, a reader thread, waitpid):
        // for the tests, the strawberry rig and the benchmark.
        .target(name: "Spawn", dependencies: ["CSpawn"], swiftSettings: strict),
        .target(name: "CSpawn"),
        // Each module's own tests, where it lives (the daemon's tests stay in GQLMuxDaemonTests).
        .testTarget(
            name: "GQLMuxConfigurationTests",
            dependencies: [
                "GQLMuxTestSupport",
                "HTTPFields",
                "AWSSigning", "GQLMuxConfiguration", "GQLMuxVocabulary", "GraphQLTransportWS", "HTTPStreaming", "LocalEndpoint",
                "LocalProtocol", "RequestValidation", "Upstream", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RequestValidationTests",
            dependencies: [
                "GQLMuxTestSupport", "GQLMuxVocabulary", "GraphQLTransportWS", "LocalProtocol", "RequestValidation",
                .product(name: "NIOCore", package: "swift-nio"),
                // The reference our own GraphQL syntax check is compared with (ExecutableDocumentTests).
                .product(name: "GraphQL", package: "GraphQL"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "LocalProtocolTests", dependencies: ["LocalProtocol", .product(name: "NIOCore", package: "swift-nio")], swiftSettings: strict),
        .testTarget(
            name: "LocalEndpointTests",
            dependencies: [
                "GQLMuxVocabulary", "JSONEnvelope", "LocalEndpoint", "LocalProtocol", "RequestValidation", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EndpointServerTests",
            dependencies: [
                "EndpointServer", "GQLMuxVocabulary", "Handover", "LocalEndpoint", "LocalProtocol", "RequestValidation",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "AWSSigningTests", dependencies: ["GQLMuxTestSupport", "AWSSigning"], swiftSettings: strict),
        .testTarget(name: "GQLMuxVocabularyTests", dependencies: ["GQLMuxVocabulary"], swiftSettings: strict),
        .testTarget(name: "HandoverTests", dependencies: ["GQLMuxTestSupport", "HTTPFields", "GQLMuxVocabulary", "Handover"], swiftSettings: strict),
        .testTarget(name: "JSONEnvelopeTests", dependencies: ["JSONEnvelope", .product(name: "NIOCore", package: "swift-nio")], swiftSettings: strict),
        .testTarget(
            name: "UpstreamFramesTests",
            dependencies: [
                "GQLMuxVocabulary", "UpstreamFrames",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "UpstreamSettingsTests", dependencies: ["UpstreamSettings"], swiftSettings: strict),
        .testTarget(name: "GQLMuxFuzzTests", dependencies: ["GQLMuxTestSupport", "GQLMuxFuzz"], swiftSettings: strict),
        .testTarget(name: "SpawnTests", dependencies: ["Spawn"], swiftSettings: strict),
        .testTarget(
            name: "ResultDeliveryTests",
            dependencies: [
                "ResultDelivery", "GQLMuxVocabulary", "LocalEndpoint", "LocalProtocol", "Multiplexing",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "GQLMuxClientCoreTests", dependencies: ["GQLMuxClientCore"], swiftSettings: strict),
        .testTarget(name: "GQLMuxClientTests", dependencies: ["GQLMuxClient"], swiftSettings: strict),
        .testTarget(name: "HTTPFieldsTests", dependencies: ["HTTPFields"], swiftSettings: strict),
        .testTarget(name: "GQLMuxCtlCommandTests", dependencies: ["GQLMuxCtlCommand", "JSONEnvelope"], swiftSettings: strict),
        .testTarget(
            name: "SystemdTests",
            dependencies: [
                "SystemdSupport", "GQLMuxDaemon", "TestUpstream", "GQLMuxTestSupport", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "MultiplexingTests",
            dependencies: ["Multiplexing", "GQLMuxVocabulary", "GraphQLTransportWS", "GQLMuxTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HTTPStreamingTests",
            dependencies: ["HTTPStreaming", "GQLMuxVocabulary", "GraphQLTransportWS", "GQLMuxTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "GraphQLTransportWSTests",
            dependencies: ["GQLMuxVocabulary", "GraphQLTransportWS", "GQLMuxTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "UpstreamTests",
            dependencies: [
                "Upstream", "TestUpstream", "GQLMuxVocabulary", "GraphQLTransportWS", "GQLMuxTestSupport", "HTTPStreaming", "GQLMuxConfiguration",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)
