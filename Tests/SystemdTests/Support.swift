import Foundation
@_exported import GQLMuxTestSupport
import NIOConcurrencyHelpers
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
/// `@unchecked Sendable` — safe because what the pipe handlers write is in lock-protected
/// boxes, and `Process` is driven by the one test task that made it.
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

/// A plain HTTP/1.0 GET to 127.0.0.1:`port` (the daemon's metrics endpoint, Prometheus's API):
/// the status code and the body. Bounded by a 5 s receive timeout; nil when nothing answers.
func httpGet(port: Int, _ path: String) -> (status: Int, body: String)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else { return nil }
    var response: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        response.append(contentsOf: chunk[0..<n])
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let headEnd = text.range(of: "\r\n\r\n"), let statusText = text.split(separator: " ").dropFirst().first,
        let status = Int(statusText)
    else { return nil }
    return (status, String(text[headEnd.upperBound...]))
}

/// A real gqlmuxd process on a socket in a fresh temporary directory, configured with
/// `[upstream] url` and `[socket] path` plus `extraConfig` (TOML appended as is).
struct DaemonProcess {
    let directory: String
    let child: Child
    var socket: String { directory + "/gqlmux.sock" }

    static func start(upstream url: String, extraConfig: String = "", prefix: String = "gqlmux-daemon") async throws -> DaemonProcess {
        let directory = try Paths.temporaryDirectory(prefix)
        try "[upstream]\nurl = \"\(url)\"\n[socket]\npath = \"\(directory)/gqlmux.sock\"\n\(extraConfig)\n"
            .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        let child = try Child(Paths.binary("gqlmuxd"), ["--config", directory + "/gqlmuxd.toml"])
        let daemon = DaemonProcess(directory: directory, child: child)
        await eventually("gqlmuxd's socket") { FileManager.default.fileExists(atPath: daemon.socket) }
        return daemon
    }

    /// SIGTERM, and the exit status; the directory is removed.
    func stop() async -> Int32 {
        child.signal(SIGTERM)
        let status = await child.wait()
        try? FileManager.default.removeItem(atPath: directory)
        return status
    }
}
