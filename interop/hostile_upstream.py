"""A hostile upstream against the real gqlmuxd: a WebSocket server that accepts the upgrade and
then answers with random, malformed and protocol-violating frames (reserved opcodes and bits,
invalid UTF-8, masked, fragmented control frames, continuations of nothing, lengths of 2^63,
truncated frames, pings and closes between fragments), in random cuts, over hundreds of
connections per seed. gqlmuxd must stay up: after each seed its process is alive, a fresh
local client gets `status`, it opened the seed's connections within 240 s (it went on
reconnecting, not stuck), and a subscriber stays connected throughout.

    python3 interop/hostile_upstream.py --gqlmuxd PATH [--seeds 1,2,3] [--connections 200]

Standard library only. Exits 1, with gqlmuxd's last log lines, if gqlmuxd dies or stops
answering; prints one line per seed otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time



def frame(rng: random.Random, opcode: int, payload: bytes, fin: bool = True, rsv: int = 0, mask: bool = False,
          length: int = -1) -> bytes:
    first = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload) if length < 0 else length
    if n < 126:
        header = bytes([first, (0x80 if mask else 0) | n])
    elif n < 1 << 16:
        header = bytes([first, (0x80 if mask else 0) | 126]) + struct.pack("!H", n)
    else:
        header = bytes([first, (0x80 if mask else 0) | 127]) + struct.pack("!Q", n)
    if mask:
        key = bytes(rng.randrange(256) for _ in range(4))
        return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return header + payload


def text(message: dict) -> bytes:
    return json.dumps(message).encode()


def hostile_frames(rng: random.Random) -> bytes:
    """One connection's bytes after the upgrade: a mix of valid protocol messages and violations."""
    out = b""
    for _ in range(rng.randint(3, 40)):
        kind = rng.randrange(22)
        sid = str(rng.randint(1, 6))
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        if kind == 0:
            out += frame(rng, 1, text({"type": "connection_ack"}))
        elif kind == 1:
            out += frame(rng, 1, text({"type": "next", "id": sid, "payload": {"data": {"tick": rng.randint(0, 9)}}}))
        elif kind == 2:
            out += frame(rng, 9, junk[:125])  # a WebSocket ping: gqlmuxd writes a pong while reading
        elif kind == 3:
            out += frame(rng, 1, text({"type": "ping", "payload": {"n": rng.randint(0, 9)}}))  # a protocol pong is written
        elif kind == 4:
            out += frame(rng, 1, b"\xff\xfe" + junk)  # invalid UTF-8
        elif kind == 5:
            out += frame(rng, 1, junk)  # not JSON
        elif kind == 6:
            out += frame(rng, rng.choice([3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF]), junk[:100])
        elif kind == 7:
            out += frame(rng, 1, text({"type": "next", "id": sid, "payload": {}}), rsv=rng.randint(1, 7))
        elif kind == 8:
            out += frame(rng, 1, text({"type": "connection_ack"}), mask=True)
        elif kind == 9:  # a text message in fragments, a ping between them
            body = text({"type": "next", "id": sid, "payload": {"data": {"frag": 1}}})
            cut = rng.randint(0, len(body))
            out += frame(rng, 1, body[:cut], fin=False) + frame(rng, 9, b"mid") + frame(rng, 0, body[cut:])
        elif kind == 10:
            out += frame(rng, 0, junk)  # a continuation of nothing
        elif kind == 11:
            out += frame(rng, 9, junk[:10], fin=False)  # a fragmented control frame
        elif kind == 12:
            out += frame(rng, 9, b"p" * 200)  # a control frame over 125 bytes
        elif kind == 13:
            out += frame(rng, 1, b"", length=(1 << 63) - 1)  # a length no one can hold
        elif kind == 14:
            out += frame(rng, 2, junk)  # binary
        elif kind == 15:
            code = rng.choice([1000, 1001, 1002, 1003, 1007, 1008, 1009, 1011, 1012, 4400, 4408, 4409, 4429, 4500, 0, 999, 5000])
            reason = rng.choice([b"", b"bye", b"\xc3\x28", junk[:50]])
            out += frame(rng, 8, (struct.pack("!H", code) + reason) if code else b"")
        elif kind == 16:
            out += frame(rng, 8, b"\x03")  # a close payload of one byte
        elif kind == 17:
            out += frame(rng, 1, text({"type": "error", "id": sid, "payload": [{"message": "no"}]}))
        elif kind == 18:
            out += frame(rng, 1, text({"type": "complete", "id": sid}))
        elif kind == 19:
            out += frame(rng, 1, text({"type": rng.choice(["subscribe", "connection_init", "pong", "x", None]), "id": sid}))
        elif kind == 20:
            out += frame(rng, 1, text({"type": "next", "id": sid, "payload": {"data": {"big": "x" * rng.randint(100, 70000)}}}))
        else:
            whole = frame(rng, 1, text({"type": "next", "id": sid, "payload": {"data": None}}))
            out += whole[: rng.randint(1, len(whole) - 1)]  # truncated: the rest never comes
            break
    return out


class HostileServer:
    def __init__(self) -> None:
        self.connections = 0
        self.seed = 0
        self.seed_start = 0  # connections before this seed's: each seed's Nth connection is the same alone or after others
        self.server = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        rng = random.Random(self.seed * 1_000_003 + self.connections - self.seed_start)
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            key = next(line.split(b":", 1)[1].strip() for line in request.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n")
            await writer.drain()
            if rng.random() < 0.7:
                await asyncio.wait_for(reader.read(4096), 1)  # its connection_init
            data = hostile_frames(rng)
            while data:  # random cuts, sometimes many frames in one write
                cut = rng.choice([1, 2, 3, 7, 64, 1000, len(data)])
                writer.write(data[:cut])
                data = data[cut:]
                await writer.drain()
                if rng.random() < 0.3:
                    await asyncio.sleep(0.001)
            if rng.random() < 0.5:
                await asyncio.wait_for(reader.read(65536), 0.2)  # its answer, or its close
        except (asyncio.TimeoutError, ConnectionError, StopIteration, asyncio.IncompleteReadError):
            pass
        finally:
            if rng.random() < 0.5 and writer.can_write_eof():
                writer.transport.abort()  # a reset, not a close
            else:
                writer.close()


async def status(socket_path: str) -> dict:
    reader, writer = await asyncio.open_unix_connection(socket_path, limit=1 << 22)
    writer.write(b'{"type":"status","id":"s"}\n')
    await writer.drain()
    answer = json.loads(await asyncio.wait_for(reader.readline(), 10))
    writer.close()
    return answer


async def run(gqlmuxd: str, seeds: list, connections: int) -> int:
    hostile = HostileServer()
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    directory = tempfile.mkdtemp(prefix="gqlmux-hostile-")
    socket_path = os.path.join(directory, "gqlmux.sock")
    config = os.path.join(directory, "gqlmuxd.toml")
    with open(config, "w") as f:
        f.write(f'[upstream]\nurl = "ws://127.0.0.1:{port}/graphql"\nreconnect_interval = 0.005\n'
                'reconnect_max_interval = 0.02\nconnection_ack_timeout = 0.5\nconnect_timeout = 2\n'
                f'[socket]\npath = "{socket_path}"\n[log]\ntarget = "stderr"\n')
    log_path = os.path.join(directory, "gqlmuxd.log")
    log = open(log_path, "w")
    daemon = subprocess.Popen([gqlmuxd, "--config", config], stdout=log, stderr=subprocess.STDOUT)
    failed = 0
    subscriber = None
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(socket_path) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        reader, writer = await asyncio.open_unix_connection(socket_path, limit=1 << 24)
        subscriber = writer
        ids = [str(i) for i in range(1, 6)]

        def subscribe(i: str) -> None:
            writer.write(text({"type": "subscribe", "id": i, "payload": {"query": f"subscription S{i} {{ tick }}"}}) + b"\n")

        for i in ids:
            subscribe(i)
        told = {"reconnecting": 0}

        async def listen() -> None:
            while line := await reader.readline():
                message = json.loads(line)
                if message.get("type") == "state" and message.get("state") == "reconnecting":
                    told["reconnecting"] += 1
                if message.get("type") in ("error", "complete") and message.get("id") in ids:
                    subscribe(message["id"])  # ended by the server's messages: ask again

        listener = asyncio.create_task(listen())
        reconnects = (await status(socket_path))["payload"]["upstream"]["reconnects"]
        for seed in seeds:
            hostile.seed = seed
            hostile.seed_start = hostile.connections
            start_connections, start_told, start_reconnects = hostile.connections, told["reconnecting"], reconnects
            started = time.monotonic()
            while hostile.connections - start_connections < connections:
                if daemon.poll() is not None:
                    break
                if time.monotonic() - started > 240:
                    print(f"seed {seed}: only {hostile.connections - start_connections} connections in 240 s", file=sys.stderr)
                    failed = 1
                    break
                await asyncio.sleep(0.05)
            alive = daemon.poll() is None
            answer = await status(socket_path) if alive else {}
            ok = alive and answer.get("type") == "status"
            reconnects = answer.get("payload", {}).get("upstream", {}).get("reconnects", reconnects)
            subscribed = not listener.done()
            print(f"seed {seed}: {hostile.connections - start_connections} hostile connections, gqlmuxd "
                  f"{'alive, status answered' if ok else 'DEAD (exit %s)' % daemon.returncode}, {reconnects - start_reconnects} "
                  f"reconnects, the subscriber {'connected' if subscribed else 'CLOSED'} and told 'reconnecting' "
                  f"{told['reconnecting'] - start_told} times", flush=True)
            # Reaching `connections` new connections within the time is itself the proof that it
            # went on reconnecting (status counts reconnects only after an acknowledged one).
            if not ok or not subscribed:
                failed = 1
                break
        listener.cancel()
    finally:
        if subscriber is not None:
            subscriber.close()
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        log.close()
        server.close()
        if failed:
            with open(log_path) as f:
                print("gqlmuxd's last log lines:\n" + "".join(f.readlines()[-40:]), file=sys.stderr)
        shutil.rmtree(directory, ignore_errors=True)
    return failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gqlmuxd", required=True)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--connections", type=int, default=200)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    sys.exit(asyncio.run(run(args.gqlmuxd, seeds, args.connections)))


if __name__ == "__main__":
    main()
