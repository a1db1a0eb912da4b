"""The README's snippets, run as written against the real gqlmuxd in front of a real strawberry
server (interop/readme_app.py, which has every field they name).

Every fenced ```python block of README.md, and every fenced ```sh block that runs curl, is run
as its own process, unchanged except for two strings that name where the README's gqlmuxd
listens: the endpoint's TCP address `127.0.0.1:4000` becomes the port this test's gqlmuxd
listens on, and the endpoint socket `/run/gqlmux/graphql.sock` (in the curl block) becomes this
gqlmuxd's. The line socket needs no substitution: the snippets' clients read `GQLMUX_SOCKET`,
as the README says. The snippets' environment has what they read from it: `GQLMUX_SOCKET`,
`ENDPOINT_TOKEN` (the endpoint's token), `ACCOUNTS_TOKEN` (an app's own token for the
`identity = "client"` upstream), and `PYTHONPATH` naming clients/python (the README says to
copy gqlmux.py next to the app). GQLMUX_SNIPPET_OUTPUT=1 prints what each snippet printed.

A snippet passes when it printed a real result for every field its GraphQL documents name (the
server's values: `hello` is "world", `tick` counts from 1, …), and nothing on stderr looks like a
failure. Subscriptions never end, so the process is stopped once the results are in. The
snippet that asks for `replay_last=True` joins a subscription another app (gqlmuxctl) holds
already, as the README describes, and its first result must be that one's latest, replayed.

Run by scripts/test.sh with the interop tests (the virtualenv's Python has gql and websockets).
"""

from __future__ import annotations

import ast
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from typing import Dict, List, Optional, Tuple

from interop.harness import BIN, PYTHON, ROOT, Daemon, Server, held_port

README = os.path.join(ROOT, "README.md")
TCP_ADDRESS = "127.0.0.1:4000"
ENDPOINT_SOCKET = "/run/gqlmux/graphql.sock"
ENDPOINT_TOKEN = "readme-snippets-endpoint-token"
ACCOUNTS_TOKEN = "alice"

# What readme_app.py answers, by field: a printed value must pass its check to count as real.
REAL: Dict[str, object] = {
    "hello": lambda v: v == "world",
    "tick": lambda v: isinstance(v, int) and v >= 1,
    "price": lambda v: isinstance(v, int) and v >= 41,
    "priceChanged": lambda v: isinstance(v, int) and v >= 41,
    "alerts": lambda v: isinstance(v, str) and v.startswith("alert "),
    "me": lambda v: v == ACCOUNTS_TOKEN,
}


def fenced_blocks(text: str, language: str) -> List[Tuple[int, str]]:
    """Each fenced block of `language`: (its first line's number in the README, its text)."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```" + language:
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n"))
            i = j
        i += 1
    return blocks


def named_fields(code: str) -> List[str]:
    """The fields the snippet's GraphQL documents select at the top level: `{ hello }`,
    `subscription { tick }` (in string literals, Python or shell)."""
    fields = []
    for document in re.findall(r"""["'](?:\{"query":")?((?:query|subscription|mutation)?\s*\{[^"'}]*\})""", code):
        body = document[document.index("{") + 1:document.rindex("}")]
        for field in re.findall(r"[A-Za-z_]\w*", body):
            if field not in fields:
                fields.append(field)
    return fields


def dicts_in(line: str) -> List[dict]:
    """Every dict literal printed on `line` (Python's repr or JSON), outermost only."""
    found = []
    depth = 0
    start = None
    for index, character in enumerate(line):
        if character == "{":
            if depth == 0:
                start = index
            depth += 1
        elif character == "}" and depth:
            depth -= 1
            if depth == 0 and start is not None:
                text = line[start:index + 1]
                for parse in (ast.literal_eval, json.loads):
                    try:
                        value = parse(text)
                    except (ValueError, SyntaxError):
                        continue
                    if isinstance(value, dict):
                        found.append(value)
                    break
    return found


def real_fields(value: dict) -> List[str]:
    """The fields of `value` (or of its `data`) holding a value the server really gives."""
    data = value.get("data") if isinstance(value.get("data"), dict) else value
    return [name for name, check in REAL.items() if name in data and check(data[name])]


class Snippet:
    """One snippet running as its own process; its output read as it comes."""

    def __init__(self, command: List[str], env: Dict[str, str]):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                        cwd=tempfile.gettempdir(), start_new_session=True)
        self.out = b""
        self.err = b""

    def read_until(self, done, seconds: float) -> bool:
        """Reads until `done(stdout so far)` holds, the process has ended and said all, or
        `seconds` passed."""
        deadline = time.monotonic() + seconds
        open_streams = [self.process.stdout, self.process.stderr]
        while time.monotonic() < deadline:
            if done(self.out.decode(errors="replace")):
                return True
            if not open_streams:
                break
            ready, _, _ = select.select(open_streams, [], [], 0.1)
            for stream in ready:
                chunk = os.read(stream.fileno(), 65536)
                if not chunk:
                    open_streams.remove(stream)
                elif stream is self.process.stdout:
                    self.out += chunk
                else:
                    self.err += chunk
        return done(self.out.decode(errors="replace"))

    def stop(self) -> Optional[int]:
        """Stops it if it still runs; its exit code if it had ended by itself, else None."""
        ended = self.process.poll()
        if ended is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.out += self.process.stdout.read()
        self.err += self.process.stderr.read()
        self.process.stdout.close()
        self.process.stderr.close()
        if os.environ.get("GQLMUX_SNIPPET_OUTPUT"):
            print(f"\n$ {' '.join(self.process.args)}\n{self.report()}")
        return ended

    def report(self) -> str:
        return (f"stdout:\n{self.out.decode(errors='replace')[-3000:]}\n"
                f"stderr:\n{self.err.decode(errors='replace')[-3000:]}")


class ReadmeSnippetTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        with open(README) as f:
            cls.readme = f.read()
        cls.server = Server("interop.readme_app:app")
        cls.server.start()
        cls.secrets = tempfile.mkdtemp(prefix="gqlmux-readme-")
        token_file = os.path.join(cls.secrets, "endpoint.token")
        with open(token_file, "w") as f:
            f.write(ENDPOINT_TOKEN + "\n")
        os.chmod(token_file, 0o600)
        cls.port = held_port()
        quick = "reconnect_interval = 0.05\nreconnect_max_interval = 0.5\n"
        cls.daemon = Daemon(
            cls.server.url,
            'connecting_payload = { token = "host" }\n' + quick,
            f'[upstreams.telemetry]\nurl = "{cls.server.url}"\nconnecting_payload = {{ token = "host" }}\n{quick}'
            f'[upstreams.accounts]\nurl = "{cls.server.url}"\nidentity = "client"\n'
            # token_file travels in Authorization: an identity = "client" upstream forwards another header.
            f'forward_headers = ["x-upstream-authorization"]\n{quick}'
            f'[graphql_endpoint]\nlisten = "127.0.0.1:{cls.port}"\ntoken_file = "{token_file}"\n')
        cls.daemon.start()
        status = json.loads(cls.ctl("status", "--json"))
        cls.endpoint_socket = next(a for a in status["graphqlEndpoint"].split() if a.startswith("/"))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop()
        cls.server.stop()
        shutil.rmtree(cls.secrets, ignore_errors=True)

    @classmethod
    def ctl(cls, *args: str) -> str:
        return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", cls.daemon.socket],
                              capture_output=True, text=True, timeout=15, check=True).stdout

    def environment(self) -> Dict[str, str]:
        return dict(os.environ, GQLMUX_SOCKET=self.daemon.socket, ENDPOINT_TOKEN=ENDPOINT_TOKEN,
                    ACCOUNTS_TOKEN=ACCOUNTS_TOKEN, PYTHONPATH=os.path.join(ROOT, "clients", "python"),
                    PYTHONUNBUFFERED="1")

    def substituted(self, code: str) -> str:
        return code.replace(TCP_ADDRESS, f"127.0.0.1:{self.port}").replace(ENDPOINT_SOCKET, self.endpoint_socket)

    def assert_clean(self, snippet: Snippet, ended: Optional[int], where: str) -> None:
        self.assertIn(ended, (None, 0), f"{where} exited with {ended}\n{snippet.report()}")
        err = snippet.err.decode(errors="replace")
        for sign in ("Traceback", "Error", "curl: ("):
            self.assertNotIn(sign, err, f"{where} failed\n{snippet.report()}")

    def test_every_python_snippet_prints_real_results(self) -> None:
        blocks = fenced_blocks(self.readme, "python")
        self.assertGreaterEqual(len(blocks), 4, "the README's Python snippets")
        for line, code in blocks:
            with self.subTest(readme_line=line):
                self.run_python(line, code)

    def run_python(self, line: str, code: str) -> None:
        fields = named_fields(code)
        self.assertTrue(fields, f"README line {line}: a snippet that asks for nothing")
        replay = "replay_last=True" in code
        sharer = None
        if replay:
            # "Joins a subscription other apps already share": another app holds it first.
            sharer = Snippet([os.path.join(BIN, "gqlmuxctl"), "subscribe", "subscription { price }",
                              "--socket", self.daemon.socket], self.environment())
            self.assertTrue(sharer.read_until(lambda out: '"price"' in out, 15), sharer.report())
        path = os.path.join(self.secrets, f"readme_{line}.py")
        with open(path, "w") as f:
            f.write(self.substituted(code))
        snippet = Snippet([PYTHON, path], self.environment())
        seen: List[str] = []
        first_result_line: List[str] = []

        def done(out: str) -> bool:
            # Whole lines only: print() writes its arguments one by one, so a line can arrive as
            # "{'price': 41}" before its " True".
            seen.clear()
            for printed in out[:out.rfind("\n") + 1].splitlines():
                for value in dicts_in(printed):
                    got = real_fields(value)
                    if got and not first_result_line:
                        first_result_line.append(printed)
                    seen.extend(f for f in got if f not in seen)
            return all(f in seen for f in fields)

        try:
            self.assertTrue(snippet.read_until(done, 30),
                            f"README line {line}: no real result for each of {fields} (seen {seen})\n{snippet.report()}")
        finally:
            ended = snippet.stop()
            if sharer is not None:
                sharer.stop()
        self.assert_clean(snippet, ended, f"README line {line}")
        if replay:
            self.assertTrue(first_result_line and first_result_line[0].rstrip().endswith("True"),
                            f"README line {line}: the first result is the shared one's latest, replayed\n{snippet.report()}")

    @unittest.skipUnless(shutil.which("curl") or os.environ.get("GQLMUX_REQUIRE_ALL") == "1",
                         "curl is not installed (scripts/prerequisites.sh test installs it)")
    def test_the_curl_snippet_answers_over_tcp_and_the_unix_socket(self) -> None:
        blocks = [(line, code) for line, code in fenced_blocks(self.readme, "sh") if "curl " in code]
        self.assertTrue(blocks, "the README's curl snippet")
        for line, code in blocks:
            with self.subTest(readme_line=line):
                commands = [c for c in re.split(r"(?<!\\)\n", code) if c.lstrip().startswith("curl ")]
                queries = sum(1 for c in commands if "subscription" not in c)
                streams = [c for c in commands if "subscription" in c]
                self.assertIn(ENDPOINT_SOCKET, code, "a command over the endpoint's Unix socket")
                self.assertIn(TCP_ADDRESS, code, "a command over the TCP port")
                snippet = Snippet(["bash", "-c", self.substituted(code)], self.environment())

                def done(out: str) -> bool:
                    lines = out.splitlines()
                    answers = sum(1 for printed in lines if not printed.startswith("data:")
                                  for value in dicts_in(printed) if "hello" in real_fields(value))
                    streamed = sum(1 for printed in lines if printed.startswith("data:")
                                   for value in dicts_in(printed) if real_fields(value))
                    return answers >= queries and ("event: next" in out or not streams) and streamed >= len(streams)

                try:
                    self.assertTrue(snippet.read_until(done, 30),
                                    f"README line {line}: {queries} answers and a streamed result\n{snippet.report()}")
                finally:
                    ended = snippet.stop()
                self.assert_clean(snippet, ended, f"README line {line}")


if __name__ == "__main__":
    unittest.main()
