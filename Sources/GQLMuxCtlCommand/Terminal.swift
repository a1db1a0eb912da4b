#if canImport(Glibc)
import Glibc
#endif

/// What the signal handlers read: set up before they are installed, behind a `let` pointer so a
/// handler touches no Swift global that would need initializing or an exclusivity check.
struct TerminalSave {
    /// The terminal's settings before `top`, and the ones it runs with.
    var original = termios()
    var raw = termios()
    /// 1 when stdin is a terminal whose settings were saved (and changed).
    var hasTermios: Int32 = 0
    /// The write end of the pipe that wakes `top`'s loop (a resize, Ctrl-Z); -1 when none.
    var wakeFD: Int32 = -1
    /// 1 once a handler is putting the terminal back: nothing is drawn after that.
    var leaving: Int32 = 0
}

nonisolated(unsafe) let terminalSave: UnsafeMutablePointer<TerminalSave> = {
    let save = UnsafeMutablePointer<TerminalSave>.allocate(capacity: 1)
    save.initialize(to: TerminalSave())
    return save
}()

/// Writes a constant with write(2) alone (async-signal-safe).
private func writeConstant(_ text: StaticString) {
    _ = Glibc.write(STDOUT_FILENO, text.utf8Start, text.utf8CodeUnitCount)
}

/// SIGINT, SIGTERM, SIGHUP: the terminal as it was, the main screen back, then exit 128 + the
/// signal (130, 143, 129).
private func leaveOnSignal(_ signal: Int32) {
    terminalSave.pointee.leaving = 1
    if terminalSave.pointee.hasTermios != 0 { tcsetattr(STDIN_FILENO, TCSANOW, &terminalSave.pointee.original) }
    writeConstant("\u{1B}[?25h\u{1B}[?1049l")
    _exit(128 + signal)
}

/// SIGWINCH (`w`) and SIGTSTP (`z`): tell the loop, which reads the new size, or leaves the
/// screen and stops (it alone draws, so no frame can land on the main screen meanwhile).
private func wakeOnSignal(_ signal: Int32) {
    let saved = errno
    var byte = signal == SIGTSTP ? UInt8(ascii: "z") : UInt8(ascii: "w")
    if terminalSave.pointee.wakeFD >= 0 { _ = Glibc.write(terminalSave.pointee.wakeFD, &byte, 1) }
    errno = saved
}

/// The terminal while `top` runs: the alternate screen, no cursor, keys read one at a time
/// without echo (Ctrl-C still signals), and everything put back by ``leave()`` or by the
/// signal handlers.
final class Terminal {
    /// Keys can be read: stdin is a terminal.
    let readsKeys: Bool
    /// The read end of the wake pipe.
    let wakeRead: Int32
    /// Its write end (the signal handlers' too).
    let wakeWrite: Int32
    private var left = false

    init() {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            }
        } else {
            fds = [-1, -1]
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let save = terminalSave
        save.pointee.wakeFD = wakeWrite
        if isatty(STDIN_FILENO) != 0, tcgetattr(STDIN_FILENO, &save.pointee.original) == 0 {
            save.pointee.raw = save.pointee.original
            save.pointee.raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &save.pointee.raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            save.pointee.hasTermios = 1
            readsKeys = tcsetattr(STDIN_FILENO, TCSANOW, &save.pointee.raw) == 0
        } else {
            readsKeys = false
        }
        for signal in [SIGINT, SIGTERM, SIGHUP] { Glibc.signal(signal, leaveOnSignal) }
        for signal in [SIGWINCH, SIGTSTP] { Glibc.signal(signal, wakeOnSignal) }
        writeConstant("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    /// Ctrl-Z: the terminal as it was, then stopped as SIGTSTP stops a program; once continued
    /// (`fg`), the alternate screen and the key settings again (the caller draws).
    func suspend() {
        let save = terminalSave
        if save.pointee.hasTermios != 0 { tcsetattr(STDIN_FILENO, TCSANOW, &save.pointee.original) }
        writeConstant("\u{1B}[?25h\u{1B}[?1049l")
        Glibc.signal(SIGTSTP, SIG_DFL)
        raise(SIGTSTP)
        Glibc.signal(SIGTSTP, wakeOnSignal)
        if save.pointee.hasTermios != 0 { tcsetattr(STDIN_FILENO, TCSANOW, &save.pointee.raw) }
        writeConstant("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    /// Puts the terminal back as it was (the main screen, the cursor, its settings); once.
    func leave() {
        guard !left else { return }
        left = true
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP] { Glibc.signal(signal, SIG_DFL) }
        let save = terminalSave
        if save.pointee.hasTermios != 0 {
            tcsetattr(STDIN_FILENO, TCSANOW, &save.pointee.original)
            save.pointee.hasTermios = 0
        }
        writeConstant("\u{1B}[?25h\u{1B}[?1049l")
        save.pointee.wakeFD = -1
    }

    deinit { leave() }

    /// The window's columns and rows (TIOCGWINSZ on stdout); 80 × 24 when it cannot tell.
    static func size() -> (width: Int, height: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 else { return (80, 24) }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    /// The locale takes UTF-8 (LC_ALL, else LC_CTYPE, else LANG says so).
    static var unicode: Bool {
        for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
            guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else { continue }
            let lower = value.lowercased()
            return lower.contains("utf-8") || lower.contains("utf8")
        }
        return false
    }

    /// What woke ``wait(milliseconds:)``.
    struct Wakeup {
        var input = false
        /// What came through the wake pipe: `f` a refresh's answer, `w` a resize, `z` Ctrl-Z.
        var pipe: [UInt8] = []
    }

    /// Waits (poll(2)) for a key, the wake pipe, or `milliseconds`.
    func wait(milliseconds: Int32, readingKeys: Bool) -> Wakeup {
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        if readingKeys { fds.append(pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)) }
        let n = poll(&fds, nfds_t(fds.count), max(0, milliseconds))
        guard n > 0 else { return Wakeup() }
        var wakeup = Wakeup()
        if fds[0].revents != 0 {
            var chunk = [UInt8](repeating: 0, count: 64)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(wakeRead, $0.baseAddress, $0.count) }
                guard n > 0 else { break }
                wakeup.pipe += chunk[..<n]
            }
        }
        if readingKeys, fds[1].revents != 0 { wakeup.input = true }
        return wakeup
    }

    /// What one read of stdin gives; nil at its end (or an error other than EINTR/EAGAIN).
    func readInput() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR || errno == EAGAIN { return [] }
        guard n > 0 else { return nil }
        return Array(buffer[..<n])
    }

    /// Draws `lines` over the screen in one write: each line at its row, cleared to its end, and
    /// the rest of the screen cleared (no flicker). The header row in reverse video.
    func draw(_ lines: [TopScreen.Line], width: Int, height: Int, unicode: Bool) {
        guard terminalSave.pointee.leaving == 0 else { return }
        var out = "\u{1B}[H"
        for (row, line) in lines.prefix(height).enumerated() {
            // The last row stops a column short: writing its last cell could scroll some terminals.
            let room = row == height - 1 ? width - 1 : width
            let text = TextCell.truncated(line.text, to: room, unicode: unicode)
            let used = TextCell.width(text)
            out += "\u{1B}[\(row + 1);1H"
            if line.emphasized {
                out += "\u{1B}[7m" + text + String(repeating: " ", count: max(0, room - used)) + "\u{1B}[0m"
            } else {
                out += text
                if used < width { out += "\u{1B}[K" }
            }
        }
        if lines.count < height { out += "\u{1B}[\(lines.count + 1);1H\u{1B}[J" }
        guard terminalSave.pointee.leaving == 0 else { return }
        write(out, to: STDOUT_FILENO)
    }
}
