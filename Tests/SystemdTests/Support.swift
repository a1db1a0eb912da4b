import Foundation
// Every file of this test target sees the shared helpers (until, eventually, repositoryRoot,
// ChildProcess) through this one import.
@_exported import GQLMuxTestSupport
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The package root and the directory holding the built executables.
enum Paths {
    static let root = repositoryRoot()

    /// `GQLMUX_BIN_DIR`, else next to the test bundle, else `.build/debug`.
    static let binDir: String = {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["GQLMUX_BIN_DIR"] { candidates.append(env) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path)
        candidates.append(root + "/.build/debug")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/gqlmuxd") } ?? root + "/.build/debug"
    }()

    static func binary(_ name: String) -> String { binDir + "/" + name }

    static func temporaryDirectory(_ prefix: String) throws -> String { try makeTemporaryDirectory(prefix) }

    static func tool(_ name: String) -> String? {
        ["/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// The systemd tests' children: `ChildProcess` (module Spawn) with stdout and stderr captured.
typealias Child = ChildProcess

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
