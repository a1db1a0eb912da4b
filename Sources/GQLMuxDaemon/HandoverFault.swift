import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Fault injection for the online restart's chaos tests: the process dies, or stops answering,
/// at a chosen step of its handover, once.
///
/// When `GQLMUX_TEST_FAULT_FILE` names a file whose text is `kill STEP` or `stall STEP`, the
/// process that reaches STEP removes the file (so the next process does not fail the same way)
/// and then kills itself with SIGKILL, or blocks its event loop for good (no more watchdog
/// pings, nothing read or written) until the service manager, or the test, kills it. A file
/// that cannot be removed injects nothing. Without the variable nothing is read: this costs
/// one `getenv` per step of a handover.
///
/// Debug builds only (the interop tests' chaos runs): in a release build `reached` is empty and
/// the variable's name is not in the binary, so no environment can make a shipped gqlmuxd kill
/// or stall itself.
package enum HandoverFault {
    /// The handover's steps, in order.
    package enum Step: String, Sendable, CaseIterable {
        /// Nothing is read or accepted any more; queries in flight are being answered.
        case draining
        /// Sorted (line clients told `reconnecting`); the carried clients' bytes are being
        /// written out.
        case flushing
        /// The record and the client connections are in the store; the listeners and the
        /// barrier are not.
        case storing
        /// Everything is in the store and the service manager has read it (after the barrier).
        case stored
        /// The upstream is closed; the process is about to exit.
        case exiting
    }

    /// Injects the fault configured for `step`, if any. `loop`: the daemon's event loop, which
    /// a stall blocks.
    package static func reached(_ step: Step, loop: any EventLoop) {
        #if DEBUG
        guard let path = getenv("GQLMUX_TEST_FAULT_FILE").map({ String(cString: $0) }), !path.isEmpty,
            let text = contents(path)
        else { return }
        let words = text.split(whereSeparator: \.isWhitespace)
        guard words.count == 2, words[1] == step.rawValue, ["kill", "stall"].contains(words[0]), unlink(path) == 0 else { return }
        if words[0] == "kill" { kill(getpid(), SIGKILL) }
        // A stall: the event loop blocked for good, and this caller too when it is elsewhere.
        if loop.inEventLoop { while true { sleep(60) } }
        loop.execute { while true { sleep(60) } }
        while true { sleep(60) }
        #endif
    }

    #if DEBUG
    /// The file's first bytes as text (a fault is a few words), or nil when it cannot be read.
    private static func contents(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: bytes[0..<count], as: UTF8.self) : nil
    }
    #endif
}
