"""What goes upstream in whose name, tried as an attacker would, against a recording upstream
(interop/websockets_app.py) that logs every upgrade header and every message it is sent.

- The endpoint's token never leaves: an app presents it every way it can (the upgrade's
  `Authorization`, `token` / `authorization` / `Authorization` / `AUTHORIZATION` in
  `connection_init`, both at once, nested, an HTTP query, an SSE stream) to an upstream with
  `identity = "client"`, and no byte of it reaches the upstream, plainly or base64-encoded.
- AppSync per identity: with `identity = "client"` each app's own token (`auth = "token"`) or key
  (`auth = "api_key"`) is what the AppSync dialect sends, in the connect's `header` and every
  `start`; with `identity = "peer"` the peer's file gives it; the host's secret never goes out on
  those lanes, and an app that presents nothing is refused.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import unittest

import websockets

from interop.harness import BIN, Daemon, LineClient, wait_for
from interop.recording_peer import RecordingPeer

TOKEN = "endpoint-token-0123456789abcdef"


def ctl(daemon: Daemon, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=30)


def lines_of(client: LineClient, id: str, kind: str) -> list:
    return [m for _, m in client.lines if m.get("id") == id and m.get("type") == kind]


def forms(secret: str) -> list:
    """The secret as it could travel: plain, and base64 at each of the three alignments (the
    part of each encoding that does not depend on the bytes around it)."""
    out = [secret]
    for pad in range(3):
        encoded = base64.b64encode(b"x" * pad + secret.encode()).decode()
        out.append(encoded[4 if pad else 0:-4])
    return out


class EndpointTokenTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.peer = RecordingPeer("transport-ws")
        self.addCleanup(self.peer.stop)
        self.token_file = os.path.join(self.peer.directory, "endpoint-token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_file, 0o600)
        self.daemon = Daemon(self.peer.url, "",
                             f'[upstreams.rec]\nurl = "{self.peer.url}"\nidentity = "client"\n'
                             'forward_headers = ["x-upstream-authorization", "x-app-token"]\n'
                             f'[graphql_endpoint]\nlisten = "127.0.0.1:0"\ntoken_file = "{self.token_file}"\n')
        self.daemon.start()
        status = json.loads(ctl(self.daemon, "status", "--json").stdout)
        http = next(a for a in status["graphqlEndpoint"].split() if a.startswith("http://"))
        self.host = http.split("//")[1].split("/")[0]

    async def asyncTearDown(self) -> None:
        self.daemon.stop()

    async def whoami(self, payload: str, headers=None) -> list:
        """A graphql-transport-ws client of /graphql/rec presenting `payload` (JSON text, sent as
        it is): its `{ whoami }` answer's messages."""
        async with websockets.connect(f"ws://{self.host}/graphql/rec", subprotocols=["graphql-transport-ws"],
                                      additional_headers=headers or {}) as ws:
            await ws.send('{"type": "connection_init", "payload": %s}' % payload)
            self.assertEqual(json.loads(await asyncio.wait_for(ws.recv(), 10))["type"], "connection_ack")
            await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": "subscription { whoami }"}}))
            out = []
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                out.append(message)
                if message["type"] in ("complete", "error"):
                    return out

    async def http(self, method: str, body: dict, accept: str) -> bytes:
        reader, writer = await asyncio.open_connection(*self.host.split(":"))
        data = json.dumps(body).encode()
        writer.write(f"{method} /graphql/rec HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                     f"X-App-Token: app-{TOKEN}\r\nContent-Type: application/json\r\nAccept: {accept}\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()
        answer = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(1 << 16), 3):
                answer += chunk
        except asyncio.TimeoutError:
            pass  # a stream still open: what came within the wait is enough
        writer.close()
        return answer

    async def test_no_byte_of_the_endpoint_token_reaches_the_upstream(self) -> None:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        escaped = TOKEN.replace("e", "\\u0065")
        cases = [  # (how, the connection_init payload as sent, the upgrade's headers, what the upstream must see)
            ("upgrade header", '{"app": "a1"}', bearer, {"app": "a1"}),
            ("Authorization in connection_init (Apollo's connectionParams)", '{"Authorization": "Bearer %s", "app": "a2"}' % TOKEN, None, {"app": "a2"}),
            ("authorization and token, and the upgrade too", '{"authorization": "Bearer %s", "token": "%s", "app": "a3"}' % (TOKEN, TOKEN), bearer, {"app": "a3"}),
            ("AUTHORIZATION", '{"AUTHORIZATION": "Bearer %s", "app": "a4"}' % TOKEN, bearer, {"app": "a4"}),
            ("an escaped token", '{"token": "%s", "app": "a5"}' % escaped, None, {"app": "a5"}),
            ("under another name", '{"apiToken": "%s", "app": "a6"}' % TOKEN, bearer, {"app": "a6"}),
        ]
        for name, payload, headers, upstream in cases:
            messages = await self.whoami(payload, headers)
            self.assertEqual(messages[-1]["type"], "complete", (name, messages))
            seen = json.loads(messages[0]["payload"]["data"]["whoami"])
            self.assertEqual(seen["payload"], upstream, name)
            self.assertIsNone(seen["authorization"], name)
        # Nested inside another value: nothing of that payload may go, so the app is refused.
        messages = await self.whoami('{"app": "a7", "headers": {"Authorization": "Bearer %s"}}' % TOKEN, bearer)
        self.assertEqual(messages[-1]["type"], "error", messages)
        self.assertEqual(messages[-1]["payload"][0]["extensions"]["code"], "FORBIDDEN")
        self.assertIn("endpoint's token", messages[-1]["payload"][0]["message"])
        # A query over HTTP and an SSE subscription, each with the token in Authorization and in
        # a forwarded header that holds it inside a longer value.
        answer = await self.http("POST", {"query": "{ whoami }"}, "application/json")
        self.assertIn(b'"whoami"', answer)
        stream = await self.http("POST", {"query": "subscription { whoami }"}, "text/event-stream")
        self.assertIn(b"event: next", stream)
        # A line client presenting it in its upstream credential.
        line = LineClient("line")
        await line.connect(self.daemon.socket)
        line.send({"type": "connection_init", "payload": {"upstream": {"payload": {"token": TOKEN, "app": "l1"},
                                                                       "headers": {"authorization": f"Bearer {TOKEN}"}}}})
        line.send({"type": "subscribe", "id": "w", "upstream": "rec", "payload": {"query": "subscription { whoami }"}})
        await wait_for(lambda: lines_of(line, "w", "complete"), 10, "the line client's whoami")
        self.assertEqual(json.loads(lines_of(line, "w", "next")[0]["payload"]["data"]["whoami"])["payload"], {"app": "l1"})
        await line.close()

        transcript = self.peer.raw_transcript()
        upgrades = [e for e in self.peer.transcript() if "headers" in e]
        self.assertGreaterEqual(len(upgrades), 7, "every case reached the upstream")
        for form in forms(TOKEN):
            self.assertNotIn(form, transcript)
        print(f"\n  endpoint token: {len(cases) + 4} ways of presenting it, {len(upgrades)} upstream connections "
              "recorded, no byte of it upstream (plain or base64)")


class AppSyncIdentityTests(unittest.IsolatedAsyncioTestCase):
    """Every lane of the recording AppSync peer, its secrets `tok-*` (tokens) and `key-*` (API keys)."""

    async def asyncSetUp(self) -> None:
        self.peer = RecordingPeer("appsync", secrets=["tok-host", "tok-alice", "tok-bob", "key-carol", "key-dave", "tok-root"])
        self.addCleanup(self.peer.stop)
        d = self.peer.directory
        for name, secret in [("host", "tok-host"), ("root", "tok-root")]:
            with open(os.path.join(d, name), "w") as f:
                f.write(secret + "\n")
        realtime = f"ws://127.0.0.1:{self.peer.port}/graphql/realtime"
        http = f"http://127.0.0.1:{self.peer.port}/graphql"
        section = f'url = "{realtime}"\ntransport = "appsync"\nhttp_url = "{http}"\n'
        self.daemon = Daemon(realtime, f'transport = "appsync"\nhttp_url = "{http}"\n'
                             f'[upstream.appsync]\nauth = "token"\nauth_token_file = "{d}/host"\n',
                             f'[upstreams.tok]\n{section}identity = "client"\n[upstreams.tok.appsync]\nauth = "token"\n'
                             f'[upstreams.key]\n{section}identity = "client"\n[upstreams.key.appsync]\nauth = "api_key"\n'
                             f'[upstreams.peer]\n{section}identity = "peer"\n[upstreams.peer.peers]\n"uid:0" = "{d}/root"\n'
                             '[upstreams.peer.appsync]\nauth = "token"\n')
        self.daemon.start()
        self.clients: list = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        self.daemon.stop()

    async def client(self, name: str, upstream: str, headers: dict = None) -> LineClient:
        client = LineClient(name)
        self.clients.append(client)
        await client.connect(self.daemon.socket)
        if headers is not None:
            client.send({"type": "connection_init", "payload": {"upstream": {"headers": headers}}})
        message = {"type": "subscribe", "id": "t", "payload": {"query": "subscription { onTick { n by } }"}}
        if upstream != "default":
            message["upstream"] = upstream
        client.send(message)
        return client

    async def test_each_app_runs_as_itself_and_the_host_secret_stays_on_the_host_lane(self) -> None:
        expected = {
            "host": ("default", None, "tok-host"),
            "alice": ("tok", {"authorization": "tok-alice"}, "tok-alice"),
            "bob": ("tok", {"Authorization": "tok-bob"}, "tok-bob"),
            "carol": ("key", {"x-api-key": "key-carol"}, "key-carol"),
            "dave": ("key", {"X-Api-Key": "key-dave"}, "key-dave"),
            "root": ("peer", None, "tok-root"),
        }
        clients = {name: await self.client(name, upstream, headers) for name, (upstream, headers, _) in expected.items()}
        # Presenting nothing, or only the other mode's header, to a client-identity AppSync upstream.
        nothing = await self.client("nothing", "tok")
        wrong = await self.client("wrong", "key", {"authorization": "key-carol"})
        await wait_for(lambda: all(len(lines_of(c, "t", "next")) >= 3 for c in clients.values()), 20,
                       f"every app streams; gqlmuxd: {self.daemon.log()[-3000:]}")
        for name, client in clients.items():
            seen = {m["payload"]["data"]["onTick"]["by"] for m in lines_of(client, "t", "next")}
            self.assertEqual(seen, {expected[name][2]}, f"{name} ran only as itself")
        for client in (nothing, wrong):
            await wait_for(lambda: lines_of(client, "t", "error"), 10, f"{client.name} is refused")
            error = lines_of(client, "t", "error")[0]["payload"][0]
            self.assertEqual(error["extensions"]["code"], "FORBIDDEN", error)
            self.assertEqual(lines_of(client, "t", "next"), [])

        # The transcript: each upstream connection carries one secret, in its connect's header
        # and in every start; the host's only on the default upstream's connection.
        by_connection: dict = {}
        for entry in self.peer.transcript():
            secrets = by_connection.setdefault(entry["connection"], set())
            if "connect_header" in entry:
                header = entry["connect_header"] or {}
                secrets.update(v for k, v in header.items() if k.lower() in ("authorization", "x-api-key"))
                if "x-api-key" in header:
                    self.assertNotIn("Authorization", header)
            if "message" in entry:
                message = json.loads(entry["message"])
                if message.get("type") == "start":
                    authorization = message["payload"]["extensions"]["authorization"]
                    secrets.update(v for k, v in authorization.items() if k.lower() in ("authorization", "x-api-key"))
        used = [s for s in by_connection.values() if s]
        self.assertTrue(all(len(s) == 1 for s in used), by_connection)
        self.assertEqual(sorted(next(iter(s)) for s in used), sorted(e[2] for e in expected.values()))
        print("\n  AppSync identities: host, alice and bob (token), carol and dave (api_key), root (peer file) each "
              f"on its own connection with only its own secret ({len(used)} connections); no credential: FORBIDDEN")


if __name__ == "__main__":
    unittest.main()
