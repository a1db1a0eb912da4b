"""An ASGI wrapper that lets a test drop every WebSocket of the server it wraps, as a rolling
deploy or a network fault does, without restarting the process.

    POST /control/drop?how=close   closes each WebSocket with 1012 "service restart"
    POST /control/drop?how=abort   drops each TCP connection without a close frame (1006)

The answer's body is the number of WebSockets dropped. Only the test harness calls it (the
server listens on 127.0.0.1).
"""


class Outages:
    def __init__(self, app):
        self.app = app
        self.sockets = set()  # the ASGI `send` of each open WebSocket, wrapped

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/control/drop":
            await self._drop(scope, receive, send)
            return
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        socket = _Socket(send)
        self.sockets.add(socket)
        try:
            await self.app(scope, receive, socket.send)
        except Exception:
            if not socket.dropped:
                raise
        finally:
            self.sockets.discard(socket)

    async def _drop(self, scope, receive, send):
        how = scope.get("query_string", b"").decode().partition("how=")[2] or "close"
        dropped = 0
        for socket in list(self.sockets):
            if await socket.drop(how):
                dropped += 1
        body = str(dropped).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _Socket:
    def __init__(self, send):
        self._send = send
        self.accepted = False
        self.dropped = False

    async def send(self, message):
        if self.dropped:
            return  # the server's handler may still write; the connection is gone
        if message["type"] == "websocket.accept":
            self.accepted = True
        await self._send(message)

    async def drop(self, how: str) -> bool:
        if self.dropped or not self.accepted:
            return False
        self.dropped = True
        if how == "abort":
            # uvicorn's WebSocket protocol objects own the asyncio transport: abort it (no FIN
            # handshake, no close frame), as a crashed proxy or a pulled cable would.
            getattr(self._send, "__self__").transport.abort()
        else:
            await self._send({"type": "websocket.close", "code": 1012, "reason": "service restart"})
        return True
