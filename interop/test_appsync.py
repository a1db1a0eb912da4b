"""AWS AppSync without AWS: the test AppSync server (interop/appsync_app.py, written from the AWS
documentation) is first proved against gql's own AppSyncWebsocketsTransport, the client that runs
against real AppSync; then the real gqlmuxd is run against it with an API key and with a token:
subscriptions through the real-time dialect, queries and a mutation over HTTP with the same
credentials, a refused credential that does not loop, and 120 local subscribers (two pooled
connections under AppSync's cap of 100) through a server kill and a key rotation.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request
from typing import Optional

from interop.fdstore import FDStore
from interop.harness import BIN, Daemon, LineClient, Server, held_port, wait_for
from interop.kinds import GQLClient, Line, Stream


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class AppSyncRig:
    """The test AppSync server on a loopback port, its secret in a file the test rewrites."""

    def __init__(self, auth: str = "api_key", secret: str = "da2-first-key", timeout_ms: int = 300000, ka_seconds: float = 60,
                 refuse_at: str = "init", max_subscriptions: int = 100):
        self.directory = tempfile.mkdtemp(prefix="gqlmux-appsync-")
        self.secret_file = os.path.join(self.directory, "server-secret")
        write(self.secret_file, secret + "\n")
        self.server = Server("interop.appsync_app:app", env={
            "GQLMUX_APPSYNC_AUTH": auth,
            "GQLMUX_APPSYNC_SECRET_FILE": self.secret_file,
            "GQLMUX_APPSYNC_TIMEOUT_MS": str(timeout_ms),
            "GQLMUX_APPSYNC_KA_SECONDS": str(ka_seconds),
            "GQLMUX_APPSYNC_REFUSE_AT": refuse_at,
            "GQLMUX_APPSYNC_MAX_SUBSCRIPTIONS": str(max_subscriptions),
            "GQLMUX_APPSYNC_TRANSCRIPT": "1",
        })
        self.host = f"127.0.0.1:{self.server.port}"
        self.server.env["GQLMUX_APPSYNC_HOST"] = self.host

    @property
    def realtime_url(self) -> str:
        return f"ws://{self.host}/graphql/realtime"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}/graphql"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://{self.host}/control/stats", timeout=10) as answer:
            return json.loads(answer.read())

    def publish(self, count: int) -> int:
        request = urllib.request.Request(f"http://{self.host}/control/publish?count={count}", method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())["sent"]

    def daemon(self, auth: str, secret: str, extra: str = "") -> Daemon:
        """`secret`: the key or token; for `iam`, the text of a shared credentials file whose
        profile `gqlmux` gqlmuxd reads."""
        secret_file = os.path.join(self.directory, "gqlmuxd-secret")
        write(secret_file, secret + "\n")
        if auth == "iam":
            keys = f'credentials_file = "{secret_file}"\nprofile = "gqlmux"\nregion = "eu-west-1"\n'
        else:
            keys = f'{"api_key_file" if auth == "api_key" else "auth_token_file"} = "{secret_file}"\n'
        daemon = Daemon(self.realtime_url,
                        f'transport = "appsync"\nhttp_url = "{self.http_url}"\n'
                        f'reconnect_interval = 0.05\nreconnect_max_interval = 0.5\n{extra}'
                        f'[upstream.appsync]\nauth = "{auth}"\n{keys}')
        daemon.secret_file = secret_file
        return daemon

    def transcript(self) -> list:
        """(direction, message type, text) of every message the server saw or sent, in order."""
        lines = []
        for name in sorted(os.listdir(self.server.directory)):
            if name.startswith("server-"):
                with open(os.path.join(self.server.directory, name)) as f:
                    for line in f:
                        parts = line.rstrip("\n").split(" ", 2)
                        if len(parts) == 3 and parts[1] in "<>":
                            kind = "upgrade" if parts[2].startswith("upgrade ") else json.loads(parts[2]).get("type")
                            lines.append((parts[1], kind, parts[2]))
        return lines

    def close(self) -> None:
        self.server.stop()


def serve(rig: AppSyncRig, daemon: Daemon, run, seconds: float) -> None:
    """Starts the test server and gqlmuxd, runs the coroutine `run()` within `seconds`, and
    stops both whatever happened."""
    try:
        rig.server.start()
        daemon.start()
        asyncio.run(asyncio.wait_for(run(), seconds))
    finally:
        daemon.stop()
        rig.close()


def ctl(daemon: Daemon, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket, "--json"],
                          capture_output=True, text=True, timeout=timeout)


class GQLAgainstTheTestServerTests(unittest.TestCase):
    """The test server agrees with the client that runs against real AppSync."""

    def gql_ticks(self, rig: AppSyncRig, auth) -> list:
        from gql import Client, gql
        from gql.transport.appsync_websockets import AppSyncWebsocketsTransport

        async def run() -> list:
            transport = AppSyncWebsocketsTransport(url=rig.realtime_url, auth=auth)
            results = []
            async with Client(transport=transport, fetch_schema_from_transport=False) as session:
                async def publish_when_subscribed() -> None:
                    await wait_for(lambda: rig.stats()["subscriptions"] == 1, 10, "gql's subscription started")
                    rig.publish(3)

                publisher = asyncio.create_task(publish_when_subscribed())
                async for result in session.subscribe(gql("subscription { onTick { n } }")):
                    results.append(result["onTick"]["n"])
                    if len(results) == 3:
                        break
                await publisher
            return results

        return asyncio.run(asyncio.wait_for(run(), 30))

    def test_gql_subscribes_with_an_api_key_and_with_a_token(self) -> None:
        from gql.transport.appsync_auth import AppSyncApiKeyAuthentication, AppSyncJWTAuthentication

        rig = AppSyncRig("api_key", "da2-gql-key")
        try:
            rig.server.start()
            self.assertEqual(self.gql_ticks(rig, AppSyncApiKeyAuthentication(host=rig.host, api_key="da2-gql-key")), [1, 2, 3])
            self.assertEqual(rig.stats()["refused"], 0)
        finally:
            rig.close()
        rig = AppSyncRig("token", "eyJ-gql-token")
        try:
            rig.server.start()
            self.assertEqual(self.gql_ticks(rig, AppSyncJWTAuthentication(host=rig.host, jwt="eyJ-gql-token")), [1, 2, 3])
        finally:
            rig.close()

    def test_gql_subscribes_with_iam_signed_by_botocore(self) -> None:
        aws_python = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-aws", "bin", "python")
        rig = AppSyncRig("iam", iam_secret("AKIAGQL", "gql/secret", "gql-token"))
        try:
            rig.server.start()
            for credentials, expected in ((("AKIAGQL", "gql/secret", "gql-token"), 0), (("AKIAGQL", "wrong", "gql-token"), 1)):
                client = subprocess.Popen([aws_python, "-m", "interop.gql_appsync_iam", rig.realtime_url, rig.host, "eu-west-1",
                                           *credentials, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                if expected == 0:
                    asyncio.run(wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "gql's signed start accepted"))
                    rig.publish(3)
                out, err = client.communicate(timeout=40)
                if expected == 0:
                    self.assertEqual((client.returncode, out.split()), (0, ["1", "2", "3"]), err)
                else:
                    self.assertNotEqual(client.returncode, 0)
                    self.assertIn("Unauthorized", err)
            self.assertEqual(rig.stats()["refused"], 1, "the wrong secret's signature was refused, the right one's accepted")
        finally:
            rig.close()

    def test_gql_is_refused_with_a_wrong_key(self) -> None:
        from gql.transport.appsync_auth import AppSyncApiKeyAuthentication

        rig = AppSyncRig("api_key", "da2-right")
        try:
            rig.server.start()
            with self.assertRaises(Exception) as refused:
                self.gql_ticks(rig, AppSyncApiKeyAuthentication(host=rig.host, api_key="da2-wrong"))
            self.assertIn("Unauthorized", repr(refused.exception))
            self.assertEqual(rig.stats()["refused"], 1)
        finally:
            rig.close()


def iam_secret(key_id: str, secret: str, token: str) -> str:
    """The test server's secret file for IAM."""
    return json.dumps({"accessKeyID": key_id, "secretAccessKey": secret, "sessionToken": token})


def credentials_file(key_id: str, secret: str, token: str) -> str:
    """An AWS shared credentials file with those credentials as profile `gqlmux`."""
    return (f"[default]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = other\n\n"
            f"[gqlmux]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\naws_session_token = {token}\n")


class SignatureVerifierTests(unittest.TestCase):
    def test_the_test_servers_verifier_accepts_botocores_signatures_and_nothing_else(self) -> None:
        from interop.appsync_app import sigv4_valid

        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "Fixtures", "sigv4-botocore.json")
        with open(path) as f:
            vectors = json.load(f)
        self.assertEqual(len(vectors), 8)
        for vector in vectors:
            headers = {k.lower(): v for k, v in {**vector["headers"], **vector["signed"]}.items()}
            headers["host"] = vector["host"]
            credentials = {"accessKeyID": vector["accessKeyID"], "secretAccessKey": vector["secretAccessKey"],
                           "sessionToken": vector["sessionToken"]}
            body = vector["body"].encode()
            self.assertTrue(sigv4_valid(headers, vector["path"], body, credentials, vector["region"]), vector["name"])
            self.assertFalse(sigv4_valid(headers, vector["path"], body + b" ", credentials, vector["region"]), vector["name"])
            self.assertFalse(sigv4_valid(headers, vector["path"], body, dict(credentials, secretAccessKey="x"), vector["region"]))
            self.assertFalse(sigv4_valid(dict(headers, host="evil.example"), vector["path"], body, credentials, vector["region"]))


class GQLMuxdOnAppSyncTests(unittest.TestCase):
    def test_the_transcript_of_each_auth_mode(self) -> None:
        modes = (("api_key", "da2-transcript", "da2-transcript"), ("token", "eyJ-transcript", "eyJ-transcript"),
                 ("iam", iam_secret("AKIATRANSCRIPT", "t/secret", "t-token"), credentials_file("AKIATRANSCRIPT", "t/secret", "t-token")))
        for auth, server_secret, daemon_secret in modes:
            with self.subTest(auth):
                rig = AppSyncRig(auth, server_secret, ka_seconds=3600)
                daemon = rig.daemon(auth, daemon_secret)
                try:
                    rig.server.start()
                    daemon.start()
                    subscriber = subprocess.Popen([os.path.join(BIN, "gqlmuxctl"), "subscribe", "subscription { onTick { n } }",
                                                   "--count", "2", "--socket", daemon.socket, "--json"],
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    asyncio.run(wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "subscribed"))
                    rig.publish(2)
                    out, err = subscriber.communicate(timeout=20)
                    self.assertEqual(subscriber.returncode, 0, err)
                    asyncio.run(wait_for(lambda: rig.stats()["subscriptions"] == 0, 10, "stopped"))
                    time.sleep(0.2)
                    transcript = rig.transcript()
                    self.assertEqual([(d, k) for d, k, _ in transcript], [
                        ("<", "upgrade"), ("<", "connection_init"), (">", "connection_ack"), (">", "ka"),
                        ("<", "start"), (">", "start_ack"), (">", "data"), (">", "data"), ("<", "stop"), (">", "complete"),
                    ])
                    start = json.loads(transcript[4][2])
                    authorization = start["payload"]["extensions"]["authorization"]
                    self.assertEqual(authorization["host"], rig.host)
                    self.assertIn({"api_key": "x-api-key", "token": "Authorization", "iam": "X-Amz-Date"}[auth], authorization)
                    if os.environ.get("GQLMUX_PRINT_TRANSCRIPT"):
                        print(f"\n--- {auth}")
                        for direction, _, text in transcript:
                            print(f"{'gqlmuxd →' if direction == '<' else '← AppSync'} {text}")
                finally:
                    daemon.stop()
                    rig.close()

    def test_iam_signed_connect_starts_and_queries_with_rotating_credentials(self) -> None:
        rig = AppSyncRig("iam", iam_secret("AKIAFIRST", "first/secret", "token-1"))
        daemon = rig.daemon("iam", credentials_file("AKIAFIRST", "first/secret", "token-1"))
        client = LineClient("c")

        async def run() -> None:
            await client.connect(daemon.socket)
            client.send({"type": "subscribe", "id": "s", "payload": {"query": "subscription { onTick { n } }"}})
            await wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "the signed start was accepted")
            rig.publish(2)
            nexts = lambda: [m["payload"]["data"]["onTick"]["n"] for _, m in client.lines if m.get("type") == "next"]
            await wait_for(lambda: nexts() == [1, 2], 20, "results through the IAM connection")
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
            # New temporary credentials: a helper rewrote the file, and AppSync wants the new ones.
            connects = rig.stats()["connects"]
            write(rig.secret_file, iam_secret("AKIASECOND", "second/secret", "token-2"))
            write(daemon.secret_file, credentials_file("AKIASECOND", "second/secret", "token-2"))
            reload = ctl(daemon, "reload")
            self.assertEqual(reload.returncode, 0, reload.stderr)
            await wait_for(lambda: rig.stats()["connects"] == connects + 1, 20, "reconnected with the new credentials")
            await wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "re-subscribed with the new credentials")
            rig.publish(1)
            await wait_for(lambda: nexts() == [1, 2, 3], 20, "still delivering")
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
            stats = rig.stats()
            self.assertEqual((stats["refused"], stats["unauthorized_starts"]), (0, 0))
            self.assertEqual(stats["queries"], 2, "both queries passed the server's signature check")
            await client.close()

        serve(rig, daemon, run, 60)

    def test_subscriptions_queries_and_a_mutation_with_an_api_key(self) -> None:
        rig = AppSyncRig("api_key", "da2-daemon-key", ka_seconds=0.5)
        daemon = rig.daemon("api_key", "da2-daemon-key")
        try:
            rig.server.start()
            daemon.start()
            subscriber = subprocess.Popen([os.path.join(BIN, "gqlmuxctl"), "subscribe", "subscription { onTick { n } }",
                                           "--count", "3", "--socket", daemon.socket, "--json"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            asyncio.run(wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "gqlmuxd's start reached AppSync"))
            rig.publish(3)
            out, err = subscriber.communicate(timeout=20)
            self.assertEqual(subscriber.returncode, 0, err)
            self.assertEqual([json.loads(line)["data"]["onTick"]["n"] for line in out.splitlines()], [1, 2, 3])
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
            mutation = ctl(daemon, "query", "mutation { publish(count: 1) }")
            self.assertEqual(json.loads(mutation.stdout), {"data": {"publish": 1}}, mutation.stderr)
            stats = rig.stats()
            self.assertEqual(stats["mutations"], 1, "the mutation ran exactly once")
            self.assertEqual(stats["queries"], 1)
            self.assertEqual(stats["unauthorized_starts"], 0)
            self.assertEqual(stats["refused"], 0)
            status = json.loads(ctl(daemon, "status").stdout)
            self.assertEqual(status["upstream"]["state"], "connected")
            self.assertEqual(status["upstream"]["protocol"], "graphql-ws")
            self.assertEqual(status["upstream"]["transport"], "appsync")
            self.assertIn("gqlmux_transport=appsync", daemon.log().lower(), "the journal names the AppSync carrier")
            asyncio.run(wait_for(lambda: rig.stats()["subscriptions"] == 0, 10, "the subscription stopped upstream"))
        finally:
            daemon.stop()
            rig.close()

    def test_a_refused_token_fails_the_upstream_without_a_hot_loop(self) -> None:
        for refuse_at in ("init", "upgrade"):
            with self.subTest(refuse_at):
                self.refused_token(refuse_at)

    def refused_token(self, refuse_at: str) -> None:
        """`init`: AppSync's connection_error after connection_init; `upgrade`: HTTP 401 to the
        WebSocket upgrade itself."""
        rig = AppSyncRig("token", "eyJ-right", refuse_at=refuse_at)
        daemon = rig.daemon("token", "eyJ-wrong")
        try:
            rig.server.start()
            daemon.start()
            asyncio.run(wait_for(lambda: json.loads(ctl(daemon, "status").stdout)["upstream"]["state"] == "failed", 20,
                                 "the upstream failed on connection_error"))
            time.sleep(2)
            self.assertEqual(rig.stats()["refused"], 1, "one refusal, no retry loop")
            status = json.loads(ctl(daemon, "status").stdout)
            self.assertRegex(json.dumps(status["upstream"]), "not authorized|HTTP 401", "the reason is in status")
            # A right token and a resume: connected again.
            write(daemon.secret_file, "eyJ-right\n")
            resumed = ctl(daemon, "resume")
            self.assertEqual(resumed.returncode, 0, resumed.stderr)
            asyncio.run(wait_for(lambda: json.loads(ctl(daemon, "status").stdout)["upstream"]["state"] == "connected", 20,
                                 "connected with the right token"))
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
        finally:
            daemon.stop()
            rig.close()

    def test_a_reload_applies_a_rotated_key_with_a_reconnect_that_keeps_subscriptions(self) -> None:
        rig = AppSyncRig("api_key", "da2-old")
        daemon = rig.daemon("api_key", "da2-old")
        client = LineClient("c")

        async def run() -> None:
            await client.connect(daemon.socket)
            client.send({"type": "subscribe", "id": "s", "payload": {"query": "subscription { onTick { n } }"}})
            await wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "subscribed upstream")
            connects = rig.stats()["connects"]
            write(rig.secret_file, "da2-new\n")  # AppSync now wants the new key (the open connection stays)
            write(daemon.secret_file, "da2-new\n")
            reload = ctl(daemon, "reload")
            self.assertEqual(reload.returncode, 0, reload.stderr)
            await wait_for(lambda: rig.stats()["connects"] == connects + 1 and rig.stats()["subscriptions"] == 1, 20,
                           "reconnected with the new key and re-subscribed")
            rig.publish(2)
            nexts = lambda: [m["payload"]["data"]["onTick"]["n"] for _, m in client.lines if m.get("type") == "next"]
            await wait_for(lambda: nexts() == [1, 2], 20, "the subscription still delivers")
            self.assertNotIn("error", [m.get("type") for _, m in client.lines])
            self.assertEqual((rig.stats()["refused"], rig.stats()["unauthorized_starts"]), (0, 0))
            await client.close()

        serve(rig, daemon, run, 60)

    def test_silence_longer_than_connection_timeout_ms_is_a_dead_peer(self) -> None:
        # The server says 1.5 s and sends one `ka` only (at its ack), as a server that hangs would.
        rig = AppSyncRig("api_key", "da2-k", timeout_ms=1500, ka_seconds=3600)
        daemon = rig.daemon("api_key", "da2-k")
        client = LineClient("c")

        async def run() -> None:
            await client.connect(daemon.socket)
            client.send({"type": "subscribe", "id": "s", "payload": {"query": "subscription { onTick { n } }"}})
            await wait_for(lambda: rig.stats()["subscriptions"] == 1, 20, "subscribed upstream")
            first = rig.stats()["connects"]
            started = time.monotonic()
            await wait_for(lambda: rig.stats()["connects"] > first, 10, "a new connection after the silence")
            self.assertGreaterEqual(time.monotonic() - started, 1.0, "not before connectionTimeoutMs")
            states = [m["state"] for _, m in client.lines if m.get("type") == "state"]
            await wait_for(lambda: [m["state"] for _, m in client.lines if m.get("type") == "state"][-1:] == ["active"], 10,
                           "active again")
            self.assertIn("reconnecting", [m["state"] for _, m in client.lines if m.get("type") == "state"], states)
            self.assertIn("peer silent for 1.5s after its last keep-alive", daemon.log(), "the journal names the dead peer")
            await client.close()

        serve(rig, daemon, run, 60)

    def test_max_subscriptions_reached_moves_the_subscription_to_another_connection(self) -> None:
        # This server takes 3 per connection; gqlmuxd is told 10: the refusals teach it.
        rig = AppSyncRig("api_key", "da2-cap", max_subscriptions=3)
        daemon = rig.daemon("api_key", "da2-cap", "max_operations_per_connection = 10\n")
        clients = [LineClient(f"c{i}") for i in range(7)]

        async def run() -> None:
            for i, client in enumerate(clients):
                await client.connect(daemon.socket)
                client.send({"type": "subscribe", "id": "s", "payload": {
                    "query": "subscription Tick($c: Int) { onTick { n } }", "variables": {"c": i}}})
            await wait_for(lambda: rig.stats()["subscriptions"] == 7, 30, "all seven started somewhere")
            self.assertEqual(rig.stats()["connections"], 3, "3 + 3 + 1 over three connections")
            rig.publish(2)
            results = lambda c: [m["payload"]["data"]["onTick"]["n"] for _, m in c.lines if m.get("type") == "next"]
            await wait_for(lambda: all(results(c) == [1, 2] for c in clients), 20, "every subscriber receiving")
            for client in clients:
                self.assertNotIn("error", [m.get("type") for _, m in client.lines], client.lines)
                await client.close()

        serve(rig, daemon, run, 60)

    def test_120_subscribers_through_a_server_kill_and_a_key_rotation(self) -> None:
        rig = AppSyncRig("api_key", "da2-before")
        daemon = rig.daemon("api_key", "da2-before")
        clients = [LineClient(f"c{i}") for i in range(120)]

        async def run() -> None:
            for i, client in enumerate(clients):
                await client.connect(daemon.socket)
                # Distinct variables: 120 upstream subscriptions, over AppSync's 100 per connection.
                client.send({"type": "subscribe", "id": "s", "payload": {
                    "query": "subscription Tick($c: Int) { onTick { n } }", "variables": {"c": i}}})
            await wait_for(lambda: rig.stats()["subscriptions"] == 120, 30, "120 subscriptions started upstream")
            self.assertEqual(rig.stats()["connections"], 2, "the pool opened a second connection at AppSync's cap")
            rig.publish(3)

            def results(client: LineClient) -> list:
                return [m["payload"]["data"]["onTick"]["n"] for _, m in client.lines if m.get("type") == "next"]

            await wait_for(lambda: all(results(c) == [1, 2, 3] for c in clients), 20, "every subscriber got 1, 2, 3")
            rig.server.kill()
            write(rig.secret_file, "da2-after\n")  # the key is rotated while AppSync is away
            write(daemon.secret_file, "da2-after\n")
            await asyncio.sleep(1)
            rig.server.start()
            await wait_for(lambda: rig.stats()["subscriptions"] == 120, 30, "every subscription re-sent with the new key")
            rig.publish(3)
            # A new server process numbers its events from 1 again.
            await wait_for(lambda: all(results(c) == [1, 2, 3, 1, 2, 3] for c in clients), 20,
                           "every subscriber got the new server's 1, 2, 3 after the kill and the rotation")
            for client in clients:
                kinds = [m.get("type") for _, m in client.lines]
                self.assertNotIn("error", kinds, client.lines)
                self.assertNotIn("complete", kinds)
                states = [m for _, m in client.lines if m.get("type") == "state"]
                self.assertIn("reconnecting", [m["state"] for m in states])
                self.assertEqual(states[-1]["state"], "active")
                self.assertGreater(states[-1].get("gapMs", 0), 500, "the gap the outage left is told")
            stats = rig.stats()
            self.assertEqual((stats["refused"], stats["unauthorized_starts"]), (0, 0), "the new key was read for the reconnect")
            for client in clients:
                await client.close()

        serve(rig, daemon, run, 120)


if __name__ == "__main__":
    unittest.main()


class AppSyncEveryKindTests(unittest.IsolatedAsyncioTestCase):
    """Local clients see nothing of the dialect: every kind gqlmuxd serves (line protocol, gql
    over both WebSocket subprotocols, SSE, multipart) on one deduplicated AppSync subscription,
    through an online restart, a pause and a resume, and a late joiner's replay."""

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.rig = AppSyncRig("api_key", "da2-kinds", ka_seconds=1)
        self.rig.server.start()
        self.port = held_port()
        secret_file = os.path.join(self.rig.directory, "gqlmuxd-secret")
        write(secret_file, "da2-kinds\n")
        self.daemon = Daemon(self.rig.realtime_url,
                             f'transport = "appsync"\nhttp_url = "{self.rig.http_url}"\n'
                             'reconnect_interval = 0.05\nreconnect_max_interval = 0.5\n'
                             f'[upstream.appsync]\nauth = "api_key"\napi_key_file = "{secret_file}"\n',
                             f'[graphql_endpoint]\nlisten = "127.0.0.1:{self.port}"\n[subscriptions]\nreplay_last = true\n')
        self.unix = os.path.join(self.daemon.directory, "graphql.sock")
        self.store = FDStore(self.daemon.directory)
        self.clients: list = []
        self.publishing = True
        self.publisher: Optional[asyncio.Task] = None

    async def asyncTearDown(self) -> None:
        self.publishing = False
        if self.publisher is not None:
            await self.publisher
        for client in self.clients:
            await client.close()
        self.daemon.stop()
        self.store.close()
        self.rig.close()

    async def publish_forever(self) -> None:
        while self.publishing:
            try:
                await asyncio.to_thread(self.rig.publish, 1)
            except OSError:
                pass
            await asyncio.sleep(0.2)

    def status(self) -> dict:
        return json.loads(ctl(self.daemon, "status").stdout)

    async def test_every_kind_through_a_restart_a_pause_and_a_replay(self) -> None:
        self.daemon.start(store=self.store)
        ws = f"ws://127.0.0.1:{self.port}/graphql"
        self.clients = [
            GQLClient("graphql-ws", "ws://localhost/graphql", unix=self.unix, keep_alive_timeout=30),
            GQLClient("graphql-ws", ws, keep_alive_timeout=30),
            GQLClient("graphql-transport-ws", "ws://localhost/graphql", unix=self.unix, ping_interval=10),
            GQLClient("graphql-transport-ws", ws, ping_interval=10),
            Stream("sse", unix=self.unix),
            Stream("multipart", port=self.port),
            Line(self.daemon.socket),
        ]
        for client in self.clients:
            client.start()
        self.publisher = asyncio.create_task(self.publish_forever())
        await wait_for(lambda: all(c.results > 0 or c.ended for c in self.clients), 30, "every kind receiving")
        self.assertEqual([(c.name, c.ended) for c in self.clients if c.ended], [])
        self.assertEqual(self.rig.stats()["subscriptions"], 1, "seven local subscribers, one AppSync subscription")

        # The online restart: every client carried, still receiving, the subscription re-sent.
        counts = [c.results for c in self.clients]
        self.daemon.process.send_signal(signal.SIGTERM)
        self.assertEqual(self.daemon.process.wait(20), 0, self.daemon.log()[-3000:])
        self.daemon.start(store=self.store)
        await wait_for(lambda: all(c.results > n or c.ended for c, n in zip(self.clients, counts)), 30,
                       "every kind receiving after the restart")
        self.assertEqual([(c.name, c.ended) for c in self.clients if c.ended], [])

        # Pause closes the connection and holds every subscription; resume sends it again.
        paused = ctl(self.daemon, "pause")
        self.assertEqual(paused.returncode, 0, paused.stderr)
        await wait_for(lambda: self.rig.stats()["subscriptions"] == 0, 10, "nothing open at AppSync while paused")
        self.assertEqual(self.status()["upstream"]["state"], "paused")
        resumed = ctl(self.daemon, "resume")
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        counts = [c.results for c in self.clients]
        await wait_for(lambda: all(c.results > n or c.ended for c, n in zip(self.clients, counts)), 30,
                       "every kind receiving after the resume")
        self.assertEqual([(c.name, c.ended) for c in self.clients if c.ended], [])
        line = self.clients[-1]
        states = [m["state"] for m in line.messages if m.get("type") == "state"]
        self.assertIn("paused", states)
        self.assertEqual(states[-1], "active")

        # A late joiner gets the last result at once, marked as a replay.
        joiner = Line(self.daemon.socket)
        self.clients.append(joiner)
        joiner.start()
        await wait_for(lambda: joiner.results > 0, 10, "the joiner's first result")
        first = next(m for m in joiner.messages if m.get("type") == "next")
        self.assertTrue(first.get("replayed"), first)
        self.assertEqual(self.rig.stats()["subscriptions"], 1, "the joiner shares the one AppSync subscription")
