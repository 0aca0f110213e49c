"""``web_fetch`` against a plain ``httpx`` GET of the same loopback URL, in the same run.

Run: ``.venv/bin/python bench/bench_web_fetch.py``. Prints, for each case, the baseline, the
tool's figure and their ratio:

* peak Python allocations (tracemalloc) fetching a gzip bomb (50 MB of zeros, about 50 KB on
  the wire) with ``max_bytes`` 1 MB, against ``httpx`` decoding the whole body;
* time of fetching a 200 KB HTML page (guard, pinned connection, markdown conversion), against
  the plain GET of it.
"""

from __future__ import annotations

import gzip
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx2

from sagents.tool.impl import WebFetcher, WebFetchSettings

BOMB = gzip.compress(b"\0" * 50_000_000, compresslevel=9)
PAGE = (
    b"<html><head><title>Bench</title></head><body>"
    + b"<h2>Section</h2><p>Some <b>bold</b> text and <a href='/x'>a link</a>.</p>" * 2500
    + b"</body></html>"
)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        bomb = self.path == "/bomb"
        body = BOMB if bomb else PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if bomb else "text/html")
        if bomb:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def _peak(run: Callable[[], Awaitable[object]]) -> int:
    tracemalloc.start()
    try:
        await run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def _seconds(run: Callable[[], Awaitable[object]], rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        await run()
    return (time.perf_counter() - start) / rounds


async def main() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    fetcher = WebFetcher(WebFetchSettings(allow_networks=("127.0.0.0/8",), max_bytes=1_000_000))
    try:
        async with httpx2.AsyncClient(trust_env=False) as client:

            async def plain(path: str) -> object:
                return (await client.get(base + path)).content

            async def bomb_tool() -> object:
                return await fetcher.fetch(base + "/bomb")

            async def page_tool() -> object:
                from sagents.tool.impl._web_fetch import html_to_markdown

                page = await fetcher.fetch(base + "/page")
                return html_to_markdown(page.body.decode())

            baseline = await _peak(lambda: plain("/bomb"))
            ours = await _peak(bomb_tool)
            print(
                f"gzip bomb peak allocations: httpx {baseline / 1e6:.1f} MB, web_fetch "
                f"{ours / 1e6:.1f} MB, ratio {ours / baseline:.3f}"
            )
            await plain("/page")
            await page_tool()
            baseline_s = await _seconds(lambda: plain("/page"), 20)
            ours_s = await _seconds(page_tool, 20)
            print(
                f"200 KB page: httpx GET {baseline_s * 1e3:.1f} ms, web_fetch with markdown "
                f"{ours_s * 1e3:.1f} ms, ratio {ours_s / baseline_s:.1f}"
            )
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    anyio.run(main)
