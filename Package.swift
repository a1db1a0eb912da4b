// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "gqlmux",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "gqlmux-test-upstream", targets: ["gqlmux-test-upstream"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        // Pure graphql-transport-ws core: messages, envelope parsing, state machine, backoff.
        // Depends on NIOCore for ByteBuffer only; no sockets, no Task, clock injected.
        .target(
            name: "GraphQLTransportWS",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        // The upstream WebSocket transport on SwiftNIO, driven by the state machine.
        .target(
            name: "Upstream",
            dependencies: [
                "GraphQLTransportWS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // In-process graphql-transport-ws server for tests and the demo.
        .target(
            name: "TestUpstream",
            dependencies: [
                "GraphQLTransportWS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "gqlmux-test-upstream",
            dependencies: ["TestUpstream"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "GraphQLTransportWSTests",
            dependencies: ["GraphQLTransportWS"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "UpstreamTests",
            dependencies: [
                "Upstream", "TestUpstream", "GraphQLTransportWS",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)
