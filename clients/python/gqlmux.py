# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 the gqlmux developers
"""gqlmux: a Python client for gqlmuxd's local protocol (docs/protocol.md).

One file, standard library only (asyncio). It behaves like the Swift ``GQLMuxClient``:

    import gqlmux

    client = gqlmux.Client()                    # $GQLMUX_SOCKET, else /run/gqlmux/gqlmux.sock
    result = await client.query("{ hello }")     # dict: the ExecutionResult
    async for result in client.subscribe("subscription { tick }", on_state=print):
        ...                                      # on_state: "pending", "active", "reconnecting", "paused"
    await client.close()

- ``subscribe(..., replay_last=True)``: joining a subscription the daemon already shares, the
  first result is its latest one at once, marked ``result["extensions"]["gqlmux"]["replayed"]``.
- ``subscribe(..., on_gap=callback)``: after an outage of the shared stream, ``callback`` gets how
  long it was down, in milliseconds (events sent meanwhile are gone).
- ``subscribe(..., resnapshot="{ price }")``: after each outage that query runs once, and its
  result comes before the stream's next ones, marked ``extensions.gqlmux.snapshot``.

- One connection to gqlmuxd per client, opened on first use, shared by every operation.
- Subscriptions survive a daemon restart: the client reconnects (0.1 s doubling to 2 s) and
  subscribes again; ``on_state`` hears "reconnecting" and then the daemon's states.
- Queries and mutations are never sent twice: a connection lost before the answer raises
  ``GQLMuxError`` with code ``CONNECTION_LOST``.
- Each subscription buffers at most ``buffered_results`` results (1024); while one is full the
  client stops reading its socket, so the daemon's ``client_buffer_bytes`` decides, and a cut
  by the daemon for falling behind ends those subscriptions with ``SLOW_CONSUMER``.
- Errors are ``GQLMuxError`` with ``.code`` (the contract's codes, e.g. ``INVALID_DOCUMENT``;
  ``UPSTREAM_ERROR`` for a server error without a code; client-side ``DAEMON_UNAVAILABLE`` and
  ``CLIENT_CLOSED``) and ``.message``.

Leaving an ``async for`` early completes the subscription when the generator is closed; use
``contextlib.aclosing(client.subscribe(...))`` to complete it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from typing import Any, AsyncIterator, Callable, Dict, List, Optional

__all__ = ["Client", "GQLMuxError", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/gqlmux/gqlmux.sock"
PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 << 20


class GQLMuxError(Exception):
    """An operation failed: ``code`` is one of the contract's codes, ``message`` says why.
    ``close_code``: for ``UPSTREAM_CLOSED``, the upstream's WebSocket close code; ``limit``: for
    ``LIMIT_EXCEEDED``, the configuration key of the limit hit (``max_operations_per_client``, …)."""

    def __init__(self, code: str, message: str = "", close_code: Optional[int] = None,
                 limit: Optional[str] = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.close_code = close_code
        self.limit = limit

    @classmethod
    def from_payload(cls, payload: Any) -> "GQLMuxError":
        """The first GraphQL error of an ``error`` payload, with its ``extensions.code``."""
        if isinstance(payload, list) and payload and isinstance(payload[0], dict):
            first = payload[0]
            extensions = first.get("extensions") or {}
            code = extensions.get("code") if isinstance(extensions, dict) else None
            close_code = extensions.get("closeCode") if isinstance(extensions, dict) else None
            limit = extensions.get("limit") if isinstance(extensions, dict) else None
            return cls(str(code or "UPSTREAM_ERROR"), str(first.get("message", "")), close_code,
                       limit if isinstance(limit, str) else None)
        if isinstance(payload, dict):
            return cls("UPSTREAM_ERROR", str(payload.get("message", json.dumps(payload))))
        return cls("UPSTREAM_ERROR", json.dumps(payload))


class _Operation:
    """One operation: a subscription (resent after a reconnect) or a single request."""

    def __init__(self, id: str, line: Dict[str, Any], subscription: bool, limit: int,
                 on_state: Optional[Callable[[str], Any]] = None,
                 on_gap: Optional[Callable[[int], Any]] = None):
        self.id = id
        self.line = line
        self.subscription = subscription
        self.on_state = on_state
        self.on_gap = on_gap
        # Results and the end: ("next", dict) or ("end", GQLMuxError | None).
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=limit + 1)
        self.limit = limit
        self.finished = False
        self.last_state: Optional[str] = None
        # The connection (Client._connections) it was last sent on: sent once per connection.
        self.sent_on = 0

    def state(self, state: str) -> None:
        """Tells ``on_state`` of a change; the same state twice in a row is one change (a
        daemon restart is told by its SHUTTING_DOWN and again by the lost connection)."""
        if state == self.last_state:
            return
        self.last_state = state
        if self.on_state is not None:
            try:
                self.on_state(state)
            except Exception:  # a callback's bug must not break the connection
                pass

    def gap(self, milliseconds: int) -> None:
        """Tells ``on_gap`` how long the shared stream was down before it resumed."""
        if self.on_gap is not None:
            try:
                self.on_gap(milliseconds)
            except Exception:  # a callback's bug must not break the connection
                pass

    @property
    def full(self) -> bool:
        return self.queue.qsize() >= self.limit

    def finish(self, error: Optional[GQLMuxError]) -> None:
        if self.finished:
            return
        self.finished = True
        # The end always fits: the queue holds one place more than the limit.
        self.queue.put_nowait(("end", error))


class Client:
    """A connection to gqlmuxd shared by every operation of this client."""

    def __init__(self, path: Optional[str] = None, *, client_name: str = "gqlmux.py",
                 reconnect: bool = True, buffered_results: int = 1024,
                 reconnect_delay: float = 0.1, max_reconnect_delay: float = 2.0,
                 upstream_payload: Optional[Dict[str, Any]] = None,
                 upstream_headers: Optional[Dict[str, str]] = None):
        """``upstream_payload`` and ``upstream_headers``: this app's own credentials, for the
        upstreams configured with ``identity = "client"`` (the connecting payload and request
        headers sent upstream in its name); never used by other upstreams."""
        self.path = path or os.environ.get("GQLMUX_SOCKET") or DEFAULT_SOCKET
        self.upstream_credentials: Dict[str, Any] = {}
        if upstream_payload is not None:
            if not isinstance(upstream_payload, dict):
                raise GQLMuxError("BAD_REQUEST", "upstream_payload must be a dict")
            self.upstream_credentials["payload"] = upstream_payload
        if upstream_headers is not None:
            if not isinstance(upstream_headers, dict) or not all(isinstance(v, str) for v in upstream_headers.values()):
                raise GQLMuxError("BAD_REQUEST", "upstream_headers must be a dict of strings")
            self.upstream_credentials["headers"] = upstream_headers
        self.client_name = client_name
        self.reconnect = reconnect
        self.buffered_results = max(1, buffered_results)
        self.reconnect_delay = reconnect_delay
        self.max_reconnect_delay = max_reconnect_delay
        self._ids = itertools.count(1)
        self._operations: Dict[str, _Operation] = {}
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional[asyncio.Task] = None
        self._connect_lock = asyncio.Lock()
        self._ever_connected = False
        self._reconnecting = False  # the connection was lost and the reconnect loop runs
        self._connections = 0  # connections opened so far; the current one's number
        self._closed = False
        self._room = asyncio.Event()  # set while no subscription's buffer is full
        self._room.set()
        self._held_back = False  # reads were held back on this connection (slow consumer)

    # -- Public API -------------------------------------------------------------------------

    async def query(self, query: str, variables: Optional[Dict[str, Any]] = None,
                    operation_name: Optional[str] = None, upstream: Optional[str] = None) -> Dict[str, Any]:
        """Runs a query (or a mutation) once and returns its ExecutionResult as a dict.
        ``upstream``: the upstream to ask, by its name in gqlmuxd's configuration (None: default)."""
        operation = self._start(self._subscribe_line(query, variables, operation_name, upstream), subscription=False)
        await self._ensure_connected(operation)
        try:
            kind, value = await operation.queue.get()
            if kind == "end":
                raise value or GQLMuxError("CONNECTION_LOST", "the operation ended without a result")
            return value
        finally:
            self._forget(operation)

    mutate = query

    async def subscribe(self, query: str, variables: Optional[Dict[str, Any]] = None,
                        operation_name: Optional[str] = None,
                        on_state: Optional[Callable[[str], Any]] = None,
                        replay_last: Optional[bool] = None,
                        on_gap: Optional[Callable[[int], Any]] = None,
                        resnapshot: Optional[str] = None,
                        upstream: Optional[str] = None) -> AsyncIterator[Dict[str, Any]]:
        """Yields each result of a subscription until the server completes it.

        Raises ``GQLMuxError`` when it ends with an error. ``on_state`` is called with
        "pending", "active", "reconnecting" and "paused" as the subscription's state changes.
        ``replay_last``: joining a subscription the daemon already shares, receive its latest
        result at once (marked ``extensions.gqlmux.replayed``); None: the daemon's default.
        ``on_gap`` is called with how long the stream was down (ms) when it resumes.
        ``resnapshot``: a query run once each time the stream resumes after an outage; its result
        comes first, marked ``extensions.gqlmux.snapshot``.
        ``upstream``: the upstream it is for, by its name in gqlmuxd's configuration (None: default).
        """
        line = self._subscribe_line(query, variables, operation_name, upstream)
        own: Dict[str, Any] = {}
        if replay_last is not None:
            own["replayLast"] = bool(replay_last)
        if resnapshot is not None:
            own["resnapshot"] = resnapshot
        if own:
            line["payload"]["extensions"] = {"gqlmux": own}
        operation = self._start(line, subscription=True, on_state=on_state, on_gap=on_gap)
        try:
            await self._ensure_connected(operation)
            while True:
                kind, value = await operation.queue.get()
                self._update_room()
                if kind == "end":
                    if value is not None:
                        raise value
                    return
                yield value
        finally:
            # Left early (break, cancel, close): complete it at the daemon.
            if not operation.finished:
                operation.finished = True
                await self._complete(operation)
            self._forget(operation)

    async def status(self) -> Dict[str, Any]:
        """The daemon's ``status`` verb, as a dict."""
        return await self._verb("status")

    async def clients(self) -> List[Dict[str, Any]]:
        """One dict per client connection (the ``clients`` verb): every one for an admin, else
        those of this process's uid."""
        return await self._verb("clients")

    async def operations(self) -> List[Dict[str, Any]]:
        """One dict per upstream operation (the ``operations`` verb), filtered as ``clients``."""
        return await self._verb("operations")

    async def metrics(self) -> str:
        """The daemon's metrics in the Prometheus text format (the ``metrics`` verb)."""
        text = await self._verb("metrics")
        if not isinstance(text, str):
            raise GQLMuxError("BAD_REQUEST", "the daemon's metrics answer is not a string")
        return text

    async def close(self) -> None:
        """Closes the connection; open operations end with ``CLIENT_CLOSED``."""
        self._closed = True
        for operation in list(self._operations.values()):
            operation.finish(GQLMuxError("CLIENT_CLOSED", "the client was closed"))
        self._operations.clear()
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._close_writer()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- Operations -------------------------------------------------------------------------

    @staticmethod
    def _subscribe_line(query: str, variables: Optional[Dict[str, Any]], operation_name: Optional[str],
                        upstream: Optional[str] = None) -> Dict[str, Any]:
        payload: Dict[str, Any] = {"query": query}
        if variables is not None:
            if not isinstance(variables, dict):
                raise GQLMuxError("BAD_REQUEST", "variables must be a dict")
            payload["variables"] = variables
        if operation_name is not None:
            payload["operationName"] = operation_name
        line: Dict[str, Any] = {"type": "subscribe", "payload": payload}
        if upstream is not None:
            if not isinstance(upstream, str):
                raise GQLMuxError("BAD_REQUEST", "upstream must be a string")
            line["upstream"] = upstream
        return line

    def _start(self, line: Dict[str, Any], subscription: bool,
               on_state: Optional[Callable[[str], Any]] = None,
               on_gap: Optional[Callable[[int], Any]] = None) -> _Operation:
        if self._closed:
            raise GQLMuxError("CLIENT_CLOSED", "the client was closed")
        try:  # here, so the caller whose request is not JSON is told, before anything is sent
            json.dumps(line)
        except (TypeError, ValueError) as error:
            raise GQLMuxError("BAD_REQUEST", f"the request is not JSON: {error}") from None
        operation = _Operation(str(next(self._ids)), line, subscription, self.buffered_results, on_state, on_gap)
        self._operations[operation.id] = operation
        return operation

    def _forget(self, operation: _Operation) -> None:
        if self._operations.get(operation.id) is operation:
            del self._operations[operation.id]
        self._update_room()

    async def _verb(self, verb: str) -> Any:
        operation = self._start({"type": verb}, subscription=False)
        await self._ensure_connected(operation)
        try:
            kind, value = await operation.queue.get()
            if kind == "end":
                raise value or GQLMuxError("CONNECTION_LOST", f"no answer to {verb}")
            return value
        finally:
            self._forget(operation)

    async def _complete(self, operation: _Operation) -> None:
        if self._operations.get(operation.id) is not operation or self._writer is None:
            return
        with contextlib.suppress(Exception):
            await self._send({"type": "complete", "id": operation.id})

    # -- Connection -------------------------------------------------------------------------

    async def _ensure_connected(self, operation: _Operation) -> None:
        """Sends the operation, connecting first if needed. While reconnecting it waits and is
        sent with the others when the connection is back (it was never sent, so no replay)."""
        async with self._connect_lock:
            if self._writer is None:
                if self._reconnecting:
                    return
                try:
                    await self._connect()  # sends every registered operation, this one too
                except OSError as error:
                    self._forget(operation)
                    raise GQLMuxError("DAEMON_UNAVAILABLE",
                                      f"cannot connect to {self.path}: {error.strerror or error}") from None
                return
            # Operations started while another connected were sent by that connect already.
            if operation.sent_on == self._connections:
                return
            with contextlib.suppress(ConnectionError, OSError):
                operation.sent_on = self._connections
                await self._send(self._line_for(operation))

    @staticmethod
    def _line_for(operation: _Operation) -> Dict[str, Any]:
        line = dict(operation.line)
        line["id"] = operation.id
        return line

    async def _connect(self) -> None:
        """Opens the connection, says hello, and sends every registered operation in order."""
        reader, writer = await asyncio.open_unix_connection(self.path, limit=MAX_LINE_BYTES)
        self._writer = writer
        self._connections += 1
        self._ever_connected = True
        self._reconnecting = False
        self._held_back = False
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader, writer))
        with contextlib.suppress(ConnectionError, OSError):  # the reader sees the close
            hello: Dict[str, Any] = {"protocol": PROTOCOL_VERSION, "client": self.client_name}
            if self.upstream_credentials:
                hello["upstream"] = self.upstream_credentials
            await self._send({"type": "connection_init", "payload": hello})
            for operation in sorted(self._operations.values(), key=lambda op: int(op.id)):
                operation.sent_on = self._connections
                await self._send(self._line_for(operation))

    async def _send(self, message: Dict[str, Any]) -> None:
        writer = self._writer
        if writer is None:
            raise ConnectionError("not connected to gqlmuxd")
        writer.write((json.dumps(message, separators=(",", ":")) + "\n").encode())
        await writer.drain()

    async def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Reads lines until the daemon closes; then reconnects while subscriptions want it."""
        connection_error: Optional[GQLMuxError] = None
        try:
            while True:
                # Hold reads back while a subscription's buffer is full (the daemon decides).
                if not self._room.is_set():
                    self._held_back = True
                    await self._room.wait()
                line = await reader.readline()
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if message.get("type") == "error" and "id" not in message:
                    connection_error = GQLMuxError.from_payload(message.get("payload"))
                    continue
                self._dispatch(message)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        # Everything up to the first await happens at once, so no request can slip in between.
        reconnect = False
        if self._writer is writer:
            self._writer = None
            if not self._closed:
                self._disconnected(connection_error)
                reconnect = self._reconnecting = self.reconnect and bool(self._operations)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        if reconnect:
            await self._reconnect_loop()

    def _dispatch(self, message: Dict[str, Any]) -> None:
        operation = self._operations.get(message.get("id"))
        if operation is None:
            return
        kind = message.get("type")
        if kind == "next":
            result = message.get("payload")
            for mark in ("replayed", "snapshot"):
                if message.get(mark) is True and isinstance(result, dict):
                    # Marked as the endpoint marks it for other GraphQL clients.
                    extensions = result.setdefault("extensions", {})
                    if isinstance(extensions, dict):
                        extensions.setdefault("gqlmux", {})[mark] = True
            operation.queue.put_nowait(("next", result))
            if operation.full:
                self._room.clear()
        elif kind == "state":
            operation.state(str(message.get("state")))
            gap = message.get("gapMs")
            if isinstance(gap, int) and not isinstance(gap, bool):
                operation.gap(gap)
        elif kind == "complete":
            self._operations.pop(operation.id, None)
            operation.finish(None)
        elif kind == "error":
            error = GQLMuxError.from_payload(message.get("payload"))
            if error.code == "SHUTTING_DOWN" and operation.subscription and self.reconnect:
                operation.state("reconnecting")  # the daemon is restarting: subscribe again later
                return
            self._operations.pop(operation.id, None)
            operation.finish(error)
        elif kind in ("status", "ok", "metrics", "clients", "operations"):
            self._operations.pop(operation.id, None)
            operation.queue.put_nowait(("next", message.get("payload")))

    def _update_room(self) -> None:
        if not any(op.full for op in self._operations.values()):
            self._room.set()

    def _disconnected(self, connection_error: Optional[GQLMuxError]) -> None:
        """Subscriptions wait for the daemon to come back; everything else fails."""
        if connection_error is not None and connection_error.code != "SHUTTING_DOWN":
            for operation in list(self._operations.values()):
                self._operations.pop(operation.id, None)
                operation.finish(connection_error)
            return
        held_back = self._held_back and connection_error is None
        keep = self.reconnect and self._ever_connected
        for operation in list(self._operations.values()):
            if held_back and operation.full:
                self._operations.pop(operation.id, None)
                operation.finish(GQLMuxError(
                    "SLOW_CONSUMER",
                    "gqlmuxd disconnected this client while this subscription's results were not being read fast enough"))
            elif operation.subscription and keep:
                operation.state("reconnecting")
            else:
                self._operations.pop(operation.id, None)
                operation.finish(GQLMuxError("CONNECTION_LOST", "the connection to gqlmuxd was lost"))
        self._update_room()

    async def _reconnect_loop(self) -> None:
        """Reconnects with a doubling delay while operations wait (subscriptions, or requests
        made while the daemon was away)."""
        delay = self.reconnect_delay
        while not self._closed and self._operations:
            await asyncio.sleep(delay)
            delay = min(self.max_reconnect_delay, delay * 2)
            async with self._connect_lock:
                if self._closed or self._writer is not None:
                    return
                try:
                    await self._connect()
                    return
                except OSError:
                    continue
        self._reconnecting = False
