import Foundation

/// gqlmuxd as a child process on a temporary socket, for the reports.
struct BenchDaemon {
    let process = Process()
    let directory: String
    var socketPath: String { directory + "/gqlmux.sock" }
    var pid: Int32 { process.processIdentifier }

    /// Starts gqlmuxd against `upstreamURL` and waits for its socket.
    /// - Parameters:
    ///   - upstreamConfig: more `[upstream]` keys; `extraConfig`: more tables, appended.
    init(path: String, upstreamURL: String, upstreamConfig: String = "", extraConfig: String = "") async throws {
        directory = NSTemporaryDirectory() + "gqlmux-bench-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "[upstream]\nurl = \"\(upstreamURL)\"\n\(upstreamConfig)\n[socket]\npath = \"\(directory)/gqlmux.sock\"\n\(extraConfig)\n"
            .write(toFile: directory + "/gqlmuxd.toml", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--config", directory + "/gqlmuxd.toml"]
        process.standardError = FileHandle.nullDevice
        try process.run()
        while !FileManager.default.fileExists(atPath: directory + "/gqlmux.sock") { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(300))
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
