import ArgumentParser
import GQLMuxClientCore
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

struct Top: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live view of gqlmuxd: its upstreams, then its clients or its operations, refreshed (like top).",
        discussion: """
            Keys: Tab, c, o switch between the clients and the operations table; s or < and S or > \
            move the sort column left or right (the arrow keys too), r reverses the order; u cycles \
            the upstream filter (every upstream, then each one); q quits. With --once, or when stdout \
            is not a terminal, it prints one plain snapshot (both tables) and exits.
            """
    )
    @OptionGroup var connection: Connection
    @Flag(name: .long, help: "Print one plain snapshot (the header and both tables, no escape codes) and exit.")
    var once = false
    @Option(name: .long, help: ArgumentHelp("Seconds between refreshes (at least 0.1).", valueName: "seconds"))
    var interval: Double = 1
    @Option(name: .long, help: "Start with only this upstream's rows (by its name in the configuration); u changes it.")
    var upstream: String?

    func validate() throws {
        guard interval.isFinite, interval >= 0.1, interval <= 86400 else { throw ValidationError("--interval must be between 0.1 and 86400 seconds") }
    }

    func run() async throws {
        var state = TopState()
        state.upstream = upstream
        if once || isatty(STDOUT_FILENO) == 0 {
            try await withClient(connection.client()) { client in
                let fetched = try await TopFetch.fetch(client)
                let context = TableContext(now: unixNow(), unicode: Terminal.unicode)
                // On a terminal the snapshot fits its width; into a pipe or file, every column whole.
                let width = isatty(STDOUT_FILENO) != 0 ? Terminal.size().width : nil
                printLine(TopScreen.plain(snapshot: fetched, state: state, width: width, context: context))
            }
            return
        }
        let client = try connection.client()
        let session = TopSession(client: client, interval: interval, state: state)
        let status = await runOnOwnThread { session.run() }
        await client.close()
        if status != 0 { throw ExitCode(status) }
    }
}

/// One refresh's three questions, asked together on the one connection.
enum TopFetch {
    static func fetch(_ client: GQLMuxClient) async throws -> TopSnapshot {
        async let status = client.status()
        async let clients = client.clients()
        async let operations = client.operations()
        let (s, c, o) = try await (status, clients, operations)
        guard let snapshot = TopSnapshot(status: s, clients: c, operations: o) else {
            throw GQLMuxError(code: "BAD_REQUEST", message: "gqlmuxd's status, clients or operations answer is not what top reads")
        }
        return snapshot
    }
}

/// `top`'s live loop, on a thread of its own (it blocks in poll(2)): asks the daemon every
/// interval (one question at a time in flight), draws, and acts on keys at once.
final class TopSession: Sendable {
    let client: GQLMuxClient
    let interval: Double
    let initial: TopState

    /// What the last refresh brought, and where to tell the loop it came (-1 once it ended).
    private struct Mailbox {
        var outcome: Result<TopSnapshot, GQLMuxError>?
        var wakeFD: Int32 = -1
    }

    private let mailbox = NIOLockedValueBox(Mailbox())

    init(client: GQLMuxClient, interval: Double, state: TopState) {
        self.client = client
        self.interval = interval
        self.initial = state
    }

    /// Runs until `q` (0); a signal exits from its handler.
    func run() -> Int32 {
        let terminal = Terminal()
        defer {
            mailbox.withLockedValue { $0.wakeFD = -1 }
            terminal.leave()
        }
        mailbox.withLockedValue { $0.wakeFD = terminal.wakeWrite }
        let unicode = Terminal.unicode
        var state = initial
        var decoder = KeyDecoder()
        var snapshot: TopSnapshot?
        var failure: String?
        var lastGood: Double?
        var fetching: Double?  // when the refresh in flight was asked
        var nextFetch = monotonicNow()
        var readsKeys = terminal.readsKeys
        while true {
            var now = monotonicNow()
            if fetching == nil, now >= nextFetch {
                fetching = now
                nextFetch = now + interval
                startFetch()
            }
            draw(
                terminal,
                snapshot: snapshot,
                state: state,
                notice: TopScreen.notice(failure: failure, lastGood: lastGood, asked: fetching, now: now, interval: interval),
                unicode: unicode
            )
            let until = fetching == nil ? nextFetch : now + min(interval, 1)
            let wakeup = terminal.wait(milliseconds: Int32(max(0, min(until - now, 86400)) * 1000), readingKeys: readsKeys)
            now = monotonicNow()
            if let outcome = mailbox.withLockedValue({ box in
                defer { box.outcome = nil }; return box.outcome
            }) {
                fetching = nil
                switch outcome {
                case .success(let fresh):
                    snapshot = fresh
                    failure = nil
                    lastGood = now
                case .failure(let error):
                    failure = error.description
                }
            }
            if wakeup.pipe.contains(UInt8(ascii: "z")) { terminal.suspend() }
            guard wakeup.input else { continue }
            guard let bytes = terminal.readInput() else {
                readsKeys = false  // stdin ended: signals still stop it
                continue
            }
            var keys = decoder.feed(bytes)
            if decoder.pendingEscape {
                decoder.flushEscape()
                keys.append(.other)
            }
            let names = snapshot?.upstreams.map(\.name) ?? []
            for key in keys {
                if state.handle(key, upstreams: names) == .quit { return 0 }
            }
        }
    }

    private func draw(_ terminal: Terminal, snapshot: TopSnapshot?, state: TopState, notice: String?, unicode: Bool) {
        let size = Terminal.size()
        let context = TableContext(now: unixNow(), unicode: unicode)
        let lines = TopScreen.frame(snapshot: snapshot, state: state, notice: notice, width: size.width, height: size.height, context: context)
        terminal.draw(lines, width: size.width, height: size.height, unicode: unicode)
    }

    /// Asks the three questions off this thread; the answer lands in the mailbox and a byte on
    /// the wake pipe.
    private func startFetch() {
        let client = self.client
        let mailbox = self.mailbox
        Task.detached {
            let outcome: Result<TopSnapshot, GQLMuxError>
            do {
                outcome = .success(try await TopFetch.fetch(client))
            } catch let error as GQLMuxError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(GQLMuxError(code: "ERROR", message: "\(error)"))
            }
            mailbox.withLockedValue { box in
                box.outcome = outcome
                var byte = UInt8(ascii: "f")
                if box.wakeFD >= 0 { _ = Glibc.write(box.wakeFD, &byte, 1) }
            }
        }
    }
}

/// Runs `body` on a new thread (not one of the concurrency pool's, which it would block) and
/// returns what it returns.
func runOnOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let start = ThreadStart { continuation.resume(returning: body()) }
        let context = Unmanaged.passRetained(start).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread,
            nil,
            { raw in
                guard let raw else { return nil }
                // A thread starts with its creator's signal mask: a concurrency pool thread's
                // blocks them all, and Ctrl-Z's SIGTSTP must reach this one.
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                Unmanaged<ThreadStart>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            },
            context
        )
        if created == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<ThreadStart>.fromOpaque(context).takeRetainedValue().run()
        }
    }
}

private final class ThreadStart: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
