"""A real browser against the local GraphQL endpoint: Debian's headless Chromium, driven by
Playwright. A page served from another origin (127.0.0.2) tries what any web page the user opens
could: a WebSocket (also from a sandboxed iframe, Origin null), fetch POSTs (no-cors text/plain,
and JSON with its preflight), an EventSource and an <img> GET. The upstream server's counters
must show that nothing reached it. A page from an origin in allowed_origins (127.0.0.3)
subscribes and queries.

Run by scripts/test.sh with the interop virtualenv's Python (playwright from PyPI, the system's
/usr/bin/chromium; no browser is downloaded).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import tempfile
import threading
import unittest

from interop.harness import held_port
from interop.test_endpoint_security import EndpointCase

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

ATTACKER = """<!doctype html><html><body><script>
const ep = "ENDPOINT";
const ws = ep.replace("http://", "ws://");
const results = {};
const mutation = JSON.stringify({query: "mutation { increment }"});
function socketTry(url) {
  return new Promise(done => {
    let s;
    try { s = new WebSocket(url, "graphql-transport-ws"); } catch (e) { return done("throw"); }
    s.onopen = () => {
      s.send(JSON.stringify({type: "connection_init"}));
      s.send(JSON.stringify({type: "subscribe", id: "1", payload: {query: "mutation { increment }"}}));
      s.send(JSON.stringify({type: "subscribe", id: "2", payload: {query: "subscription { tick }"}}));
      setTimeout(() => done("opened"), 1000);
    };
    s.onmessage = m => done("message " + m.data);
    s.onerror = () => done("error");
  });
}
async function run() {
  results.websocket = await socketTry(ws);
  try { await fetch(ep, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: mutation});
        results.noCorsPost = "sent"; } catch (e) { results.noCorsPost = "failed"; }
  try { const r = await fetch(ep, {method: "POST", headers: {"Content-Type": "application/json"}, body: mutation});
        results.corsPost = "status " + r.status; } catch (e) { results.corsPost = "blocked"; }
  results.eventSource = await new Promise(done => {
    const es = new EventSource(ep + "?query=" + encodeURIComponent("subscription { tick }"));
    es.onmessage = () => { es.close(); done("message"); };
    es.onerror = () => { es.close(); done("error"); };
    setTimeout(() => { es.close(); done("timeout"); }, 3000);
  });
  results.img = await new Promise(done => {
    const img = new Image();
    img.onload = () => done("load"); img.onerror = () => done("error");
    img.src = ep + "?query=" + encodeURIComponent("{ hello }");
  });
  results.sandboxedWebsocket = await new Promise(done => {
    window.addEventListener("message", m => done(m.data));
    const frame = document.createElement("iframe");
    frame.sandbox = "allow-scripts";
    frame.srcdoc = "<script>" + socketTry.toString() +
      "socketTry('" + ws + "').then(r => parent.postMessage(r, '*'));<\\/script>";
    document.body.appendChild(frame);
    setTimeout(() => done("timeout"), 5000);
  });
  document.body.setAttribute("data-results", JSON.stringify(results));
  document.title = "done";
}
run();
</script></body></html>
"""

FRIEND = """<!doctype html><html><body><script>
const ep = "ENDPOINT";
const results = {ticks: []};
async function run() {
  const r = await fetch(ep, {method: "POST", headers: {"Content-Type": "application/json"},
                             body: JSON.stringify({query: "{ hello }"})});
  results.query = await r.json();
  await new Promise(done => {
    const s = new WebSocket(ep.replace("http://", "ws://"), "graphql-transport-ws");
    s.onopen = () => {
      s.send(JSON.stringify({type: "connection_init"}));
      s.send(JSON.stringify({type: "subscribe", id: "t", payload: {query: "subscription { tick(intervalMs: 50) }"}}));
    };
    s.onmessage = m => {
      const message = JSON.parse(m.data);
      if (message.type === "next") results.ticks.push(message.payload.data.tick);
      if (results.ticks.length === 3) { s.close(); done(); }
    };
    s.onerror = () => { results.error = "websocket error"; done(); };
  });
  document.body.setAttribute("data-results", JSON.stringify(results));
  document.title = "done";
}
run();
</script></body></html>
"""


class PageServer:
    """A static page on its own loopback address (its own origin)."""

    def __init__(self, address: str, page: str, port: int = 0):
        self.directory = tempfile.mkdtemp(prefix="gqlmux-page-")
        with open(os.path.join(self.directory, "index.html"), "w") as f:
            f.write(page)
        directory = self.directory

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=directory, **kwargs)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((address, port), Handler)
        self.origin = f"http://{address}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)


# Skipped only outside CI, where scripts/prerequisites.sh may not have run as root; in CI the
# browser must be there and the test must run.
@unittest.skipUnless(os.path.exists(CHROMIUM) or os.environ.get("CI") or os.environ.get("GQLMUX_REQUIRE_ALL") == "1", "Debian's chromium is not installed (scripts/prerequisites.sh test installs it)")
class BrowserTests(EndpointCase):
    async def asyncSetUp(self) -> None:
        # The friendly page's origin is known before gqlmuxd starts: it is in allowed_origins.
        self.friend_port = held_port("127.0.0.3")
        self.endpoint = f'allowed_origins = ["http://127.0.0.3:{self.friend_port}"]\n'
        await super().asyncSetUp()
        endpoint = f"http://127.0.0.1:{self.port}/graphql"
        self.attacker = PageServer("127.0.0.2", ATTACKER.replace("ENDPOINT", endpoint))
        self.friend = PageServer("127.0.0.3", FRIEND.replace("ENDPOINT", endpoint), self.friend_port)

    async def asyncTearDown(self) -> None:
        self.attacker.stop()
        self.friend.stop()
        await super().asyncTearDown()

    async def visit(self, browser, url: str) -> dict:
        page = await browser.new_page()
        try:
            await page.goto(url)
            await page.wait_for_function("document.title === 'done'", timeout=30_000)
            return json.loads(await page.get_attribute("body", "data-results"))
        finally:
            await page.close()

    async def test_a_foreign_page_achieves_nothing_and_an_allowed_one_works(self) -> None:
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                hostile = await self.visit(browser, self.attacker.origin + "/index.html")
                print("\nforeign page (127.0.0.2):", json.dumps(hostile))
                counts = await self.counts()
                print("upstream counters after it:", counts)
                self.assertEqual((counts["mutations"], counts["hellos"], counts["started"]), (0, 0, 0), (hostile, counts))
                self.assertNotIn("message", hostile["websocket"])
                self.assertNotIn("message", hostile["sandboxedWebsocket"])
                self.assertEqual(hostile["corsPost"], "blocked")
                self.assertNotEqual(hostile["eventSource"], "message")
                log = self.daemon.log()
                self.assertIn(f"GQLMUX_ORIGIN={self.attacker.origin}", log)
                self.assertIn("GQLMUX_ORIGIN=null", log)
                self.assertIn("GQLMUX_FETCH_SITE=cross-site", log)

                friendly = await self.visit(browser, self.friend.origin + "/index.html")
                print("allowed page (127.0.0.3):", json.dumps(friendly))
                self.assertEqual(friendly["query"], {"data": {"hello": "world"}})
                self.assertEqual(len(friendly["ticks"]), 3, friendly)
                counts = await self.counts()
                self.assertEqual((counts["mutations"], counts["hellos"], counts["started"]), (0, 1, 1), counts)
            finally:
                await browser.close()


if __name__ == "__main__":
    unittest.main()
