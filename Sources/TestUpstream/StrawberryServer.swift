import Foundation
import NIOCore
import NIOPosix
import Spawn

#if canImport(Glibc)
import Glibc
#endif

/// A strawberry-graphql server run by uvicorn from the virtualenv that `scripts/test.sh`
/// (and so `.ci/run`) installs. Started on a free loopback port; restartable on that port.
/// `@unchecked Sendable` — safe because one test drives it from one task at a time.
package final class StrawberryServer: @unchecked Sendable {
    package let port: Int
    private var process: ChildProcess?
    private let python: String

    /// `GQLMUX_INTEROP_PYTHON`, else `.venv-interop/bin/python` at the package root.
    package static var python: String? {
        let root = URL(fileURLWithPath: Self.root)
        let candidates: [String?] = [
            ProcessInfo.processInfo.environment["GQLMUX_INTEROP_PYTHON"], root.appendingPathComponent(".venv-interop/bin/python").path,
        ]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// `GQLMUX_INTEROP_PROTOCOLS` of interop/strawberry_app.py: "modern", "legacy" or "both".
    private let protocols: String

    /// Holds `port` while this server lives, also while it is killed (see ``PortReservation``).
    private let reservation: PortReservation

    package init(python: String, protocols: String = "modern") throws {
        self.python = python
        self.protocols = protocols
        self.reservation = try PortReservation()
        self.port = reservation.port
    }

    package var url: String { "ws://127.0.0.1:\(port)/graphql" }

    package func start() async throws {
        let process = try ChildProcess(
            python,
            ["-m", "uvicorn", "interop.strawberry_app:app", "--host", "127.0.0.1", "--port", "\(port)", "--log-level", "warning"],
            environment: ["GQLMUX_INTEROP_PROTOCOLS": protocols],
            workingDirectory: Self.root,
            stdout: .inherit,
            stderr: .inherit
        )
        self.process = process
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if Self.canConnect(port: port) { return }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "uvicorn did not start on \(port)"])
    }

    /// Kills the server abruptly (SIGKILL): clients see the TCP connection vanish.
    package func kill() {
        guard let process else { return }
        process.signal(SIGKILL)
        process.waitBlocking()
        self.process = nil
    }

    static func canConnect(port: Int) -> Bool {
        let channel = try? ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port).wait()
        try? channel?.close().wait()
        return channel != nil
    }
}
