import Spawn
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Child processes without Foundation: output captured whole, exit codes and signals told
/// apart, the systemd variables never inherited, a child that outlives its wait killed.
@Suite struct ChildProcessTests {
    @Test func outputIsCapturedWholeAndTheExitCodeIsTheChilds() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "printf 'out\\n'; printf 'err' >&2; head -c 200000 /dev/zero; exit 3"])
        #expect(await child.wait() == 3)
        #expect(child.stdout.hasPrefix("out\n") && child.stdout.utf8.count == 4 + 200_000, "past a pipe's buffer, nothing lost")
        #expect(child.stderr == "err")
        #expect(!child.isRunning)
    }

    @Test func stdinBytesReachTheChildAndItsWorkingDirectoryIsTheOneGiven() async throws {
        let (status, output) = try await runCommand("/bin/cat", [], stdin: .bytes(Array("fed in".utf8)))
        #expect(status == 0 && output == "fed in")
        let child = try ChildProcess("/bin/pwd", [], workingDirectory: "/tmp")
        #expect(await child.wait() == 0)
        #expect(child.stdout == "/tmp\n")
    }

    @Test func theSystemdVariablesAreNotInheritedAndTheGivenOnesAreSet() async throws {
        // The rule on its own (this process's environment is shared by every test running
        // beside this one, so it is not changed here).
        let inherited = Dictionary(uniqueKeysWithValues: ChildProcess.systemdVariables.map { ($0, "from the runner") } + [("PATH", "/bin")])
        let merged = ChildProcess.environment(inheriting: inherited, setting: ["NOTIFY_SOCKET": "/tmp/the-tests-own", "GQLMUX_X": "1"])
        #expect(merged == ["PATH": "/bin", "NOTIFY_SOCKET": "/tmp/the-tests-own", "GQLMUX_X": "1"])
        // And what a real child gets.
        let child = try ChildProcess("/usr/bin/env", [], environment: ["GQLMUX_SPAWN_TEST": "set"])
        #expect(await child.wait() == 0)
        let names = child.stdout.split(separator: "\n").map { $0.prefix { $0 != "=" } }
        #expect(names.contains("GQLMUX_SPAWN_TEST") && names.contains("PATH"))
    }

    @Test func aSignalIsToldAs128PlusItsNumberAndAChildPastItsWaitIsKilled() async throws {
        let signalled = try ChildProcess("/bin/sleep", ["30"])
        #expect(signalled.isRunning)
        signalled.signal(SIGTERM)
        #expect(await signalled.wait() == 128 + SIGTERM)
        let started = ContinuousClock.now
        let stuck = try ChildProcess("/bin/sleep", ["30"])
        #expect(await stuck.wait(seconds: 0.2) == 128 + SIGKILL)
        #expect(ContinuousClock.now - started < .seconds(10))
        stuck.signal(SIGTERM)  // reaped: nothing is sent to a pid that may be someone else's
    }

    @Test func aMissingExecutableIsAnErrorNotAChild() {
        #expect(throws: (any Error).self) { try ChildProcess("/nonexistent/gqlmux-no-such-tool", []) }
    }
}
