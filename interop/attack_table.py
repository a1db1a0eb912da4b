"""The endpoint's attacks as a table: each one against the gqlmuxd in $GQLMUX_BIN_DIR, in front
of strawberry, with what reached the server. It uses only configuration keys every version has,
so the same table can be made for an older build beside the current one:

    GQLMUX_BIN_DIR=.build/debug .venv-interop/bin/python -m interop.attack_table

Not a test (the tests are test_endpoint_security.py and test_browser.py): a report, about 90 s.
"""
import asyncio
import json
import os
import resource
import subprocess
import time

from interop import endpoint_attacks as attack
from interop.harness import BIN, Daemon, LineClient, Server

MUT = "mutation { increment }"
rows = []


def row(name, how, result):
    rows.append((name, how, result))
    print(f"| {name} | {how} | {result} |", flush=True)


# 1,100 connections at once: take the hard open-file limit, as gqlmuxd does.
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
print("| attack | how | result |\n|---|---|---|", flush=True)


async def counts(server):
    return await server.streams()


def make(server, extra="", prefix=None, endpoint='listen = "127.0.0.1:0"\n'):
    d = Daemon(server.url, 'connecting_payload = { token = "secret" }\nreconnect_interval = 0.05\nreconnect_max_interval = 0.5\n'
               f'http_url = "{server.http_url}"\n[upstream.headers]\nAuthorization = "Bearer secret"\n',
               extra + "[graphql_endpoint]\n" + endpoint)
    d.start(prefix)
    st = json.loads(subprocess.run([os.path.join(BIN, "gqlmuxctl"), "status", "--json", "--socket", d.socket], capture_output=True, text=True).stdout)
    addrs = st["graphqlEndpoint"].split()
    http = next(a for a in addrs if a.startswith("http://"))
    port = int(http.split(":")[2].split("/")[0])
    unix = next(a for a in addrs if a.startswith("/"))
    return d, ("127.0.0.1", port), f"127.0.0.1:{port}", unix


async def ws_mutation(tcp, host, headers):
    try:
        resp, reader, writer = await attack.upgrade(tcp, host, headers)
    except Exception as e:
        return f"upgrade failed {e!r}"
    if resp.status != 101:
        writer.close()
        return f"upgrade refused {resp.status}"
    writer.write(attack.frame(json.dumps({"type": "connection_init"})))
    writer.write(attack.frame(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": MUT}})))
    await writer.drain()
    out = []
    try:
        for _ in range(2):
            op, data = await attack.read_frame(reader, 5)
            out.append(data.decode(errors="replace")[:60])
    except Exception:
        pass
    writer.close()
    return "101, " + "; ".join(out)


async def main():
    server = Server("interop.strawberry_app:app", protocols="http")
    server.start()
    try:
        d, tcp, host, unix = make(server)
        try:
            before = (await counts(server))["mutations"]
            r = await ws_mutation(tcp, host, {"Origin": "https://evil.example"})
            row("page WebSocket, foreign Origin", "raw upgrade `Origin: https://evil.example`, then `mutation { increment }`",
                f"{r[:70]}; mutations run upstream: {(await counts(server))['mutations'] - before}")
            before = (await counts(server))["mutations"]
            r = await ws_mutation(tcp, host, {"Origin": "null"})
            row("sandboxed iframe WebSocket", "raw upgrade `Origin: null`, then the mutation",
                f"{r[:40]}; mutations run upstream: {(await counts(server))['mutations'] - before}")
            before = (await counts(server))["mutations"]
            resp = await attack.post_json(tcp, MUT, f"evil.example:{tcp[1]}")
            row("DNS rebinding", "POST the mutation with `Host: evil.example:PORT`",
                f"HTTP {resp.status}; mutations run upstream: {(await counts(server))['mutations'] - before}")
            before = (await counts(server))["hellos"]
            resp = await attack.request(tcp, "GET", attack.get_target("{ hello }"), host, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"})
            row("`<img>` GET", "GET `?query={ hello }` with `Sec-Fetch-Site: cross-site`",
                f"HTTP {resp.status}; queries run upstream: {(await counts(server))['hellos'] - before}")
            before = (await counts(server))["mutations"]
            resp = await attack.post_json(tcp, MUT, host, content_type="application/jsonx")
            row("media type by prefix", "POST the mutation with `Content-Type: application/jsonx`",
                f"HTTP {resp.status}; mutations run upstream: {(await counts(server))['mutations'] - before}")
            # header trickle
            reader, writer = await attack.open_connection(tcp)
            writer.write(b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            await writer.drain()
            t0 = time.monotonic()
            try:
                ans = await asyncio.wait_for(reader.read(), 15)
                res = f"closed after {time.monotonic() - t0:.1f} s with {ans[:24]!r}"
            except asyncio.TimeoutError:
                res = "still open after 15 s"
            writer.close()
            row("header trickle", "half a request head, never finished", res)
        finally:
            d.stop()
        # reload raising max_document_tokens, then GET mutation
        d, tcp, host, unix = make(server, "[limits]\nmax_document_tokens = 5\n")
        try:
            with open(d.config) as f:
                t = f.read()
            with open(d.config, "w") as f:
                f.write(t.replace("max_document_tokens = 5", "max_document_tokens = 1000"))
            subprocess.run([os.path.join(BIN, "gqlmuxctl"), "reload", "--socket", d.socket], capture_output=True)
            before = (await counts(server))["mutations"]
            resp = await attack.request(tcp, "GET", attack.get_target("mutation { increment increment increment }"), host)
            row("mutation over GET after a reload", "start with `max_document_tokens = 5`, reload with 1000, GET a 6-token mutation",
                f"HTTP {resp.status}; mutations run upstream: {(await counts(server))['mutations'] - before}")
        finally:
            d.stop()
        # allowed_uids bypass
        try:
            d, tcp, host, unix = make(server, "[security]\nallowed_uids = [12345]\n")
        except Exception:
            row("excluded local user over TCP", "`allowed_uids = [12345]` with `listen`; uid 65534 POSTs the mutation",
                "gqlmuxd refuses to start: `listen` needs `token_file` or `allow_all_local_users` (exit 1)")
        else:
            try:
                os.chmod(d.directory, 0o755)
                before = (await counts(server))["mutations"]
                client = ("import socket,sys\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\nb=b'{\"query\":\"mutation { increment }\"}'\n"
                          "s.sendall(b'POST /graphql HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(b) + b)\n"
                          "print(s.recv(200).decode().split(chr(13))[0])\n")
                r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", client, str(tcp[1])],
                                   capture_output=True, text=True, timeout=20)
                row("excluded local user over TCP", "`allowed_uids = [12345]` with `listen`; uid 65534 POSTs the mutation",
                    f"{r.stdout.strip()}; mutations run upstream: {(await counts(server))['mutations'] - before}")
            finally:
                d.stop()
        # 1030 idle endpoint connections lock out the line socket
        d, tcp, host, unix = make(server)
        try:
            conns = []
            for _ in range(1030):
                resp, r, w = await attack.upgrade(tcp, host)
                conns.append(w)
            c = LineClient("root-app")
            await c.connect(d.socket)
            c.send({"type": "subscribe", "id": "q", "payload": {"query": "{ hello }"}})
            await asyncio.sleep(2)
            got = [m.get("type") + (":" + m["payload"][0]["extensions"]["code"] if m.get("type") == "error" else "") for _, m in c.lines]
            row("idle connections lock others out", "1,030 idle WebSocket upgrades to the TCP port, then a line-socket app queries",
                f"the app got {got[:2]}")
            await c.close()
            for w in conns:
                w.close()
        finally:
            d.stop()
        # half-sent bodies
        d, tcp, host, unix = make(server)
        try:
            await asyncio.sleep(0.5)
            rss0 = d.rss_kib()
            conns = []
            for i in range(500):
                r, w = await attack.open_connection(tcp)
                w.write(attack.build("POST", "/graphql", host, {"Content-Type": "application/json", "Content-Length": "1040000"}))
                w.write(b'{"query":"' + b"x" * 1_000_000)
                conns.append((r, w))
            await asyncio.sleep(5)
            refused = sum(1 for r, _ in conns if r.at_eof() or r._buffer)
            row("half-sent bodies", "500 connections each sending 1,000,000 of a 1,040,000-byte body",
                f"RSS {rss0 // 1024} → {d.rss_kib() // 1024} MB; {refused} answered 503 and closed")
            for _, w in conns:
                w.close()
        finally:
            d.stop()
        # 1100 idle TCP with soft 1024
        d, tcp, host, unix = make(server, prefix=["prlimit", "--nofile=1024:1024"])
        try:
            c = LineClient("victim")
            await c.connect(d.socket)
            c.send({"type": "subscribe", "id": "t", "payload": {"query": "subscription { tick(intervalMs: 50) }"}})
            await asyncio.sleep(1)
            conns = []
            for _ in range(1100):
                try:
                    conns.append(await asyncio.wait_for(attack.open_connection(tcp), 2))
                except Exception:
                    break
            await server.drop("close")
            since = time.monotonic()
            await asyncio.sleep(10)
            got = sum(1 for t, m in c.lines if t >= since and m.get("type") == "next")
            emfile = d.log().count("Too many open files")
            row("descriptor exhaustion", "soft limit 1,024: a subscriber, 1,100 idle TCP connections, then the server drops the WebSocket",
                f"subscriber got {got} results in the 10 s after the drop; 'Too many open files' in the log {emfile} times")
            await c.close()
            for _, w in conns:
                w.close()
        finally:
            d.stop()
    finally:
        server.stop()


asyncio.run(main())
