"""A test AWS AppSync server (an ASGI app for uvicorn), written from the AWS AppSync Developer
Guide, "Building a real-time WebSocket client", so that gqlmuxd's AppSync dialect can be tested
without AWS. gql's own `AppSyncWebsocketsTransport`, which runs against real AppSync, is proved
against it first (interop/test_appsync.py).

What it does, as AppSync does:
- `GET /graphql/realtime` (WebSocket, subprotocol `graphql-ws`): the authorization headers arrive
  base64-encoded in the `header` query parameter (and `payload=e30=`). `connection_init` is
  answered with `connection_ack` and `payload.connectionTimeoutMs`, or, when the headers do not
  authorize, with `connection_error` (`UnauthorizedException`, 401) and a close. Then a `ka` at
  once and every `GQLMUX_APPSYNC_KA_SECONDS`.
- `start` carries `payload.data` (the request as a JSON string) and
  `payload.extensions.authorization` (the same headers, checked again): answered with `start_ack`
  and then `data` messages; a query or mutation is refused with an `error` for that id
  (`UnsupportedOperation`); more than `GQLMUX_APPSYNC_MAX_SUBSCRIPTIONS` on one connection is
  `MaxSubscriptionsReachedError`. `stop` is confirmed with `complete`. A message it cannot read
  gets an `error` without an id.
- `POST /graphql`: queries and mutations, authorized by `x-api-key` or `Authorization`; 401 with
  `UnauthorizedException` otherwise. `{ hello }`, `{ stats }`, `mutation { publish(count: N) }`
  (sends N `onTick` events to every subscription, numbered on from the last).

The valid secret is read from `GQLMUX_APPSYNC_SECRET_FILE` at every check, so a test rotates it
by rewriting that file. `GQLMUX_APPSYNC_AUTH` is `api_key`, `token` or `iam`; for `iam` the file
holds `{"accessKeyID", "secretAccessKey", "sessionToken"}` and every request must carry a
Signature Version 4 (service `appsync`, region `GQLMUX_APPSYNC_REGION`) over `POST
/graphql/connect` with body `{}` (the connect), over `POST /graphql` with the `start`'s data, or
over the HTTP request itself, checked by `sigv4_valid` (which accepts botocore's own signatures:
interop/test_appsync.py). `GQLMUX_APPSYNC_HOST` is the `host` every authorization must name. Control for tests: `GET /control/stats`,
`POST /control/publish?count=N`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import re
from typing import Dict, Optional, Tuple
from urllib.parse import parse_qs

AUTH = os.environ.get("GQLMUX_APPSYNC_AUTH", "api_key")
SECRET_FILE = os.environ.get("GQLMUX_APPSYNC_SECRET_FILE", "")
HOST = os.environ.get("GQLMUX_APPSYNC_HOST", "")
TIMEOUT_MS = int(os.environ.get("GQLMUX_APPSYNC_TIMEOUT_MS", "300000"))
KA_SECONDS = float(os.environ.get("GQLMUX_APPSYNC_KA_SECONDS", "60"))
MAX_SUBSCRIPTIONS = int(os.environ.get("GQLMUX_APPSYNC_MAX_SUBSCRIPTIONS", "100"))
REGION = os.environ.get("GQLMUX_APPSYNC_REGION", "eu-west-1")
# "upgrade": refuse unauthorized connects with HTTP 401 at the upgrade instead of connection_error.
REFUSE_AT = os.environ.get("GQLMUX_APPSYNC_REFUSE_AT", "init")
# Every message of every connection, in order, on stdout ("<" from the client, ">" to it).
TRANSCRIPT = os.environ.get("GQLMUX_APPSYNC_TRANSCRIPT") == "1"


def transcript(connection: int, direction: str, text: str) -> None:
    if TRANSCRIPT:
        print(f"{connection} {direction} {text}", flush=True)

UNAUTHORIZED = {"errorType": "UnauthorizedException", "message": "You are not authorized to make this call.", "errorCode": 401}

STATS = {"connects": 0, "refused": 0, "connections": 0, "subscriptions": 0, "starts": 0, "stops": 0,
         "queries": 0, "mutations": 0, "published": 0, "unauthorized_starts": 0}
# Every live subscription: (connection, id) → the connection's send.
SUBSCRIPTIONS: Dict[Tuple[int, str], "Connection"] = {}
NEXT_TICK = [0]


def secret() -> str:
    with open(SECRET_FILE) as f:
        return f.read().strip()


SIGNATURE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                       r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def sigv4_valid(headers: dict, path: str, body: bytes, credentials: dict, region: str) -> bool:
    """Whether `headers` (names in lower case) sign `POST path` (with its query string, if any)
    with `body` for `appsync` in `region` with `credentials`, by the Signature Version 4 rules."""
    path, _, query = path.partition("?")
    pairs = sorted((name, value) for name, _, value in (part.partition("=") for part in query.split("&") if part))
    canonical_query = "&".join(f"{name}={value}" for name, value in pairs)
    match = SIGNATURE.match(str(headers.get("authorization", "")))
    if not match:
        return False
    key_id, date, scope_region, service, signed, signature = match.groups()
    names = signed.split(";")
    amz_date = str(headers.get("x-amz-date", ""))
    if (key_id, scope_region, service) != (credentials["accessKeyID"], region, "appsync") or not amz_date.startswith(date):
        return False
    if "host" not in names or "x-amz-date" not in names or names != sorted(names):
        return False
    token = credentials.get("sessionToken")
    if token and (headers.get("x-amz-security-token") != token or "x-amz-security-token" not in names):
        return False
    canonical_headers = "".join(f"{name}:{' '.join(str(headers.get(name, '')).split())}\n" for name in names)
    canonical = "\n".join(["POST", path, canonical_query, canonical_headers, signed, hashlib.sha256(body).hexdigest()])
    scope = f"{date}/{region}/appsync/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + credentials["secretAccessKey"]).encode()
    for part in (date, region, "appsync", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), signature)


def authorized(headers: Optional[dict], check_host: bool = True, path: str = "/graphql", body: bytes = b"{}") -> bool:
    """`path` and `body`: the request an IAM signature must cover."""
    if not isinstance(headers, dict):
        return False
    lowered = {str(k).lower(): v for k, v in headers.items()}
    if check_host and HOST and lowered.get("host") != HOST:
        return False
    if AUTH == "api_key":
        return lowered.get("x-api-key") == secret()
    if AUTH == "iam":
        return sigv4_valid(lowered, path, body, json.loads(secret()), REGION)
    return lowered.get("authorization") == secret()


class Connection:
    def __init__(self, send) -> None:
        self._send = send
        self.lock = asyncio.Lock()
        self.key = id(self)
        self.ids: set = set()

    async def send(self, message: dict) -> None:
        async with self.lock:
            text = json.dumps(message)
            transcript(self.key, ">", text)
            await self._send({"type": "websocket.send", "text": text})


async def publish(count: int) -> int:
    sent = 0
    for _ in range(count):
        NEXT_TICK[0] += 1
        n = NEXT_TICK[0]
        for (_, sid), connection in list(SUBSCRIPTIONS.items()):
            try:
                await connection.send({"type": "data", "id": sid, "payload": {"data": {"onTick": {"n": n}}}})
                sent += 1
            except Exception:  # a connection closing meanwhile
                pass
    STATS["published"] += count
    return sent


async def realtime(scope, receive, send) -> None:
    if "graphql-ws" not in scope.get("subprotocols", []):
        await send({"type": "websocket.close", "code": 1002})
        return
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        headers = json.loads(base64.b64decode(query["header"][0]))
    except Exception:
        headers = None
    event = await receive()
    if event["type"] != "websocket.connect":
        return
    if REFUSE_AT == "upgrade" and not authorized(headers, path="/graphql/connect", body=b"{}"):
        STATS["refused"] += 1
        await send({"type": "websocket.http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "websocket.http.response.body", "body": json.dumps({"errors": [UNAUTHORIZED]}).encode()})
        return
    await send({"type": "websocket.accept", "subprotocol": "graphql-ws"})
    STATS["connects"] += 1
    connection = Connection(send)
    transcript(connection.key, "<", f"upgrade {scope['path']} subprotocol graphql-ws, header = {json.dumps(headers)}")
    keep_alive: Optional[asyncio.Task] = None
    acknowledged = False
    STATS["connections"] += 1
    try:
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            text = event.get("text") or (event.get("bytes") or b"").decode(errors="replace")
            transcript(connection.key, "<", text)
            try:
                message = json.loads(text)
                kind = message["type"]
            except Exception:
                await connection.send({"type": "error", "payload": {"errors": [{"errorType": "UnsupportedOperation", "message": "Invalid message"}]}})
                continue
            if kind == "connection_init":
                if not authorized(headers, path="/graphql/connect", body=b"{}"):
                    STATS["refused"] += 1
                    await connection.send({"type": "connection_error", "payload": {"errors": [UNAUTHORIZED]}})
                    await send({"type": "websocket.close", "code": 1000})
                    return
                acknowledged = True
                await connection.send({"type": "connection_ack", "payload": {"connectionTimeoutMs": TIMEOUT_MS}})

                async def keep_alives() -> None:
                    while True:
                        await connection.send({"type": "ka"})
                        await asyncio.sleep(KA_SECONDS)

                keep_alive = asyncio.create_task(keep_alives())
            elif kind == "start" and acknowledged:
                await start(connection, message)
            elif kind == "stop" and acknowledged:
                sid = str(message.get("id"))
                if SUBSCRIPTIONS.pop((connection.key, sid), None) is not None:
                    connection.ids.discard(sid)
                    STATS["stops"] += 1
                await connection.send({"type": "complete", "id": sid})
            else:
                await connection.send({"type": "error", "payload": {"errors": [{"errorType": "UnsupportedOperation", "message": f"Unsupported message type {kind}"}]}})
    finally:
        STATS["connections"] -= 1
        if keep_alive is not None:
            keep_alive.cancel()
        for sid in list(connection.ids):
            SUBSCRIPTIONS.pop((connection.key, sid), None)


async def start(connection: Connection, message: dict) -> None:
    sid = message.get("id")
    payload = message.get("payload") or {}
    if not isinstance(sid, str) or not sid:
        await connection.send({"type": "error", "payload": {"errors": [{"errorType": "UnsupportedOperation", "message": "start without an id"}]}})
        return
    STATS["starts"] += 1
    authorization = (payload.get("extensions") or {}).get("authorization")
    if not authorized(authorization, path="/graphql", body=str(payload.get("data", "")).encode()):
        STATS["unauthorized_starts"] += 1
        await connection.send({"type": "error", "id": sid, "payload": {"errors": [UNAUTHORIZED]}})
        return
    try:
        request = json.loads(payload["data"])
        document = request["query"]
    except Exception:
        await connection.send({"type": "error", "id": sid, "payload": {"errors": [{"errorType": "BadRequestException", "message": "payload.data is not a JSON request"}]}})
        return
    if not re.match(r"\s*subscription\b", document):
        await connection.send({"type": "error", "id": sid, "payload": {"errors": [{"errorType": "UnsupportedOperation", "message": "Only subscriptions are supported over the real-time endpoint."}]}})
        return
    if len(connection.ids) >= MAX_SUBSCRIPTIONS:
        await connection.send({"type": "error", "id": sid, "payload": {"errors": [{"errorType": "MaxSubscriptionsReachedError", "message": f"Max number of {MAX_SUBSCRIPTIONS} subscriptions reached"}]}})
        return
    connection.ids.add(sid)
    SUBSCRIPTIONS[(connection.key, sid)] = connection
    await connection.send({"type": "start_ack", "id": sid})


async def read_body(receive) -> bytes:
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            return body


async def respond(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})


async def http(scope, receive, send) -> None:
    path = scope["path"]
    if path == "/control/stats":
        return await respond(send, 200, dict(STATS, subscriptions=len(SUBSCRIPTIONS)))
    if path == "/control/publish":
        count = int(parse_qs(scope.get("query_string", b"").decode()).get("count", ["1"])[0])
        return await respond(send, 200, {"sent": await publish(count)})
    if path != "/graphql" or scope["method"] != "POST":
        return await respond(send, 404, {"errors": [{"message": "not found"}]})
    body = await read_body(receive)
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    if not authorized(headers, check_host=AUTH == "iam", path=path, body=body):
        return await respond(send, 401, {"errors": [UNAUTHORIZED]})
    try:
        document = json.loads(body)["query"]
    except Exception:
        return await respond(send, 400, {"errors": [{"errorType": "BadRequestException", "message": "not a GraphQL request"}]})
    if document.lstrip().startswith("mutation"):
        STATS["mutations"] += 1
        match = re.search(r"publish\(count:\s*(\d+)\)", document)
        count = int(match.group(1)) if match else 1
        await publish(count)
        return await respond(send, 200, {"data": {"publish": count}})
    STATS["queries"] += 1
    if "stats" in document:
        return await respond(send, 200, {"data": {"stats": json.dumps(STATS)}})
    return await respond(send, 200, {"data": {"hello": "world"}})


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "websocket":
        await realtime(scope, receive, send)
    elif scope["type"] == "http":
        await http(scope, receive, send)
