internal import CSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, its output read by one plain thread and its exit
/// reaped with `waitpid`: no libdispatch sources are involved.
///
/// Tests, the benchmark and the strawberry rig used Foundation's `Process` with
/// `FileHandle.readabilityHandler`. On Linux that installs a dispatch read source per pipe, and
/// tearing those down while other sources churn corrupts libdispatch's epoll bookkeeping: the
/// test runner crashed with SIGSEGV in `_dispatch_event_loop_drain` on a fresh machine
/// (swift-corelibs-libdispatch issue 949, swift-corelibs-foundation issue 3276).
///
/// The child gets an empty signal mask and default signal dispositions (the test runner's
/// threads block everything), `/dev/null` or the given bytes as stdin, and no inherited
/// systemd variables (`NOTIFY_SOCKET`, `LISTEN_FDS`, ...), so a test never notifies or hands
/// sockets to the wrong process by accident. File descriptors above 2 are closed in the child.
package final class ChildProcess: Sendable {
    /// What the child reads on stdin.
    package enum Input: Sendable {
        case null
        /// Written whole before `init` returns, then closed: keep it under the pipe's 64 KiB.
        case bytes([UInt8])
    }

    /// Where the child's stdout or stderr goes.
    package enum Output: Sendable {
        /// Collected; read it with `stdout` / `stderr`.
        case capture
        case discard
        /// The same file as ours.
        case inherit
    }

    /// Variables a child never inherits from the test runner.
    package static let systemdVariables = ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"]

    /// A child's environment: the runner's without ``systemdVariables`` (a test run under
    /// systemd must not hand its notify socket or listeners on), then `given` on top (a test
    /// may set them for its child on purpose). Pure.
    package static func environment(inheriting inherited: [String: String], setting given: [String: String]) -> [String: String] {
        var merged = inherited
        for key in systemdVariables { merged[key] = nil }
        merged.merge(given) { _, new in new }
        return merged
    }

    package let pid: Int32
    private let captured: Mutex<(stdout: [UInt8], stderr: [UInt8], openPipes: Int)>
    /// The wait status once reaped; after that `pid` may belong to someone else.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` (a path) with `arguments`.
    /// - Parameters:
    ///   - environment: set on top of the runner's environment, minus `systemdVariables`.
    ///   - workingDirectory: the child's current directory; ours when nil.
    package init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        stdin: Input = .null,
        stdout: Output = .capture,
        stderr: Output = .capture
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        var parentEnds: [Int32] = []
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        var stdinWriter: Int32 = -1

        switch stdin {
        case .null:
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .bytes:
            let (read, write) = try Self.pipe()
            childEnds.append(read)
            stdinWriter = write
            posix_spawn_file_actions_adddup2(&actions, read, 0)
        }
        var readers: [(fd: Int32, isStdout: Bool)] = []
        for (target, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch output {
            case .capture:
                let (read, write) = try Self.pipe()
                parentEnds.append(read)
                childEnds.append(write)
                readers.append((read, target == 1))
                posix_spawn_file_actions_adddup2(&actions, write, target)
            case .discard:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case .inherit:
                break
            }
        }
        cspawn_addclosefrom(&actions, 3)
        if let workingDirectory { cspawn_addchdir(&actions, workingDirectory) }

        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var inherited: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let pair = String(cString: pointer)
            if let equals = pair.firstIndex(of: "=") { inherited[String(pair[..<equals])] = String(pair[pair.index(after: equals)...]) }
            entry += 1
        }
        let merged = Self.environment(inheriting: inherited, setting: environment)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard status == 0 else {
            for fd in parentEnds { close(fd) }
            if stdinWriter >= 0 { close(stdinWriter) }
            throw SpawnError(executable: executable, errno: status)
        }
        pid = child
        captured = Mutex(([], [], readers.count))

        if case .bytes(let bytes) = stdin {
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(stdinWriter, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
            close(stdinWriter)
        }
        if !readers.isEmpty { startReader(readers) }
    }

    /// Everything the child has written to stdout so far (when captured).
    package var stdout: String { captured.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    /// Everything the child has written to stderr so far (when captured).
    package var stderr: String { captured.withLock { String(decoding: $0.stderr, as: UTF8.self) } }

    /// Whether the child has not exited yet (reaps it when it has).
    package var isRunning: Bool { reap(blocking: false) == nil }

    /// Sends `signal` unless the child has already been reaped.
    package func signal(_ signal: Int32) {
        reaped.withLock { status in
            if status == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits for exit without blocking a thread, killing the child after `seconds`; then waits
    /// (at most 5 s) until captured output reaches end of file.
    /// - Returns: the exit code, or 128 + the signal that ended it.
    package func wait(seconds: Double = 10) async -> Int32 {
        let deadline = ContinuousClock.now + .seconds(seconds)
        // A cancelled task (a test past its time limit) stops waiting and kills the child.
        while isRunning && ContinuousClock.now < deadline && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
        if isRunning { signal(SIGKILL) }
        let status = waitBlocking()
        // A process the child left behind may still hold the pipes open, so this is bounded.
        let drained = ContinuousClock.now + .seconds(5)
        while captured.withLock({ $0.openPipes }) > 0 && ContinuousClock.now < drained && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return status
    }

    /// Blocks the calling thread until the child exits.
    /// - Returns: the exit code, or 128 + the signal that ended it.
    @discardableResult
    package func waitBlocking() -> Int32 {
        Self.exitCode(reap(blocking: true)!)
    }

    /// Reaps the child when it has exited: the wait status, or nil while it runs.
    private func reap(blocking: Bool) -> Int32? {
        reaped.withLock { reaped in
            if let reaped { return reaped }
            var status: Int32 = 0
            while true {
                let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
                if result == pid {
                    reaped = status
                    return status
                }
                if result == 0 { return nil }
                if errno == EINTR { continue }
                // ECHILD: someone else reaped it; report it as killed.
                reaped = 0x7f00 | SIGKILL
                return reaped
            }
        }
    }

    private static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard cspawn_pipe_cloexec(&fds) == 0 else { throw SpawnError(executable: "pipe2", errno: errno) }
        return (fds[0], fds[1])
    }

    /// One thread polls the captured pipes until both reach end of file, then closes them.
    private func startReader(_ readers: [(fd: Int32, isStdout: Bool)]) {
        let context = Unmanaged.passRetained(ReaderContext(child: self, readers: readers)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { raw in
                let context = Unmanaged<ReaderContext>.fromOpaque(raw!).takeRetainedValue()
                context.child.readUntilEndOfFile(context.readers)
                return nil
            },
            context
        )
        if result == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<ReaderContext>.fromOpaque(context).release()
        }
    }

    private func readUntilEndOfFile(_ readers: [(fd: Int32, isStdout: Bool)]) {
        var open = readers
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            var polls = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polls, nfds_t(polls.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            var closed: [Int32] = []
            for (index, entry) in polls.enumerated() where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress!, $0.count) }
                if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                if count <= 0 {
                    closed.append(entry.fd)
                    continue
                }
                let chunk = buffer[0..<count]
                let isStdout = open[index].isStdout
                captured.withLock { if isStdout { $0.stdout += chunk } else { $0.stderr += chunk } }
            }
            for fd in closed {
                close(fd)
                open.removeAll { $0.fd == fd }
                captured.withLock { $0.openPipes -= 1 }
            }
        }
        for reader in open {
            close(reader.fd)
            captured.withLock { $0.openPipes -= 1 }
        }
    }
}

/// What the reader thread needs, passed through `pthread_create`'s one pointer.
private final class ReaderContext {
    let child: ChildProcess
    let readers: [(fd: Int32, isStdout: Bool)]

    init(child: ChildProcess, readers: [(fd: Int32, isStdout: Bool)]) {
        self.child = child
        self.readers = readers
    }
}

/// `posix_spawn` (or a pipe for it) failed.
package struct SpawnError: Error, CustomStringConvertible {
    package let executable: String
    package let errno: Int32
    package var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
}

/// Runs a command to completion (killed after `seconds`).
/// - Returns: its exit code and its stdout followed by its stderr.
@discardableResult
package func runCommand(
    _ executable: String,
    _ arguments: [String],
    stdin: ChildProcess.Input = .null,
    seconds: Double = 30
) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess(executable, arguments, stdin: stdin)
    let status = await child.wait(seconds: seconds)
    return (status, child.stdout + child.stderr)
}
