import Foundation
import Spawn

/// gqlmuxd as a child process on a temporary socket, for the reports.
struct BenchDaemon {
    let process: ChildProcess
    let directory: String
    var socketPath: String { directory + "/gqlmux.sock" }
    var pid: Int32 { process.pid }

    /// Starts gqlmuxd against `upstreamURL` and waits for its socket.
    /// - Parameters:
    ///   - upstreamConfig: more `[upstream]` keys; `extraConfig`: more tables, appended.
    init(path: String, upstreamURL: String, upstreamConfig: String = "", extraConfig: String = "") async throws {
        directory = NSTemporaryDirectory() + "gqlmux-bench-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let url = upstreamURL.isEmpty ? "" : "url = \"\(upstreamURL)\"\n"
        try "[upstream]\n\(url)\(upstreamConfig)\n[socket]\npath = \"\(directory)/gqlmux.sock\"\n\(extraConfig)\n"
            .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        process = try ChildProcess(path, ["--config", directory + "/gqlmuxd.toml"], stdout: .discard, stderr: .discard)
        while !FileManager.default.fileExists(atPath: directory + "/gqlmux.sock") { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(300))
    }

    func stop() {
        process.signal(SIGTERM)
        process.waitBlocking()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
