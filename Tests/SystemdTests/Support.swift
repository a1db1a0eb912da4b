import Foundation
import NIOConcurrencyHelpers
@_exported import GQLMuxTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The package root and the directory holding the built executables.
enum Paths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// `GQLMUX_BIN_DIR`, else next to the test bundle, else `.build/debug`.
    static let binDir: String = {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["GQLMUX_BIN_DIR"] { candidates.append(env) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path)
        candidates.append(root + "/.build/debug")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/gqlmuxd") } ?? root + "/.build/debug"
    }()

    static func binary(_ name: String) -> String { binDir + "/" + name }

    static func temporaryDirectory(_ prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }

    static func tool(_ name: String) -> String? {
        ["/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}


/// A child process with captured stderr.
final class Child: @unchecked Sendable {
    let process = Process()
    private let errors = Pipe()
    private let outputs = Pipe()
    private let box = NIOLockedValueBox(Data())
    private let outBox = NIOLockedValueBox(Data())
    /// How many of the two pipes have reached end of file.
    private let closedPipes = NIOLockedValueBox(0)

    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"] { env[key] = nil }
        env.merge(environment) { _, new in new }
        process.environment = env
        process.standardError = errors
        process.standardOutput = outputs
        process.standardInput = FileHandle.nullDevice
        for (pipe, sink) in [(errors, box), (outputs, outBox)] {
            pipe.fileHandleForReading.readabilityHandler = { [closedPipes] handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    closedPipes.withLockedValue { $0 += 1 }
                } else {
                    sink.withLockedValue { $0.append(data) }
                }
            }
        }
        // Children inherit the spawning thread's signal mask; the test runner's threads block
        // everything, which would leave a child deaf to SIGTERM. Spawn with an empty mask.
        var empty = sigset_t()
        var previous = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
    }

    var stderr: String { box.withLockedValue { String(decoding: $0, as: UTF8.self) } }
    var stdout: String { outBox.withLockedValue { String(decoding: $0, as: UTF8.self) } }
    var pid: Int32 { process.processIdentifier }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits for exit (killing after `seconds`); returns the exit status.
    func wait(seconds: Double = 10) async -> Int32 {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // Everything the child wrote is read once both pipes reach end of file. A process the
        // child left behind may still hold them open, so this wait is bounded.
        let drained = ContinuousClock.now + .seconds(5)
        while closedPipes.withLockedValue({ $0 }) < 2 && ContinuousClock.now < drained {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return process.terminationStatus
    }
}

/// Runs a command to completion (killed after `seconds`) and returns (status, stdout + stderr).
/// Never blocks a thread: output is collected by readability handlers.
@discardableResult
func runCommand(_ executable: String, _ arguments: [String], seconds: Double = 30) async throws -> (status: Int32, output: String) {
    let child = try Child(executable, arguments)
    let status = await child.wait(seconds: seconds)
    return (status, child.stdout + child.stderr)
}
