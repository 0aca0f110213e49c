"""A real HTTP server in a process of its own, on 127.0.0.1 (the egress proxy refuses the host
process's own ports, so a peer that a sandbox may reach must live elsewhere). A test fixture.

Every GET answers ``peer <path>``; ``/headers`` answers the request's header lines instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

_SERVER = """\
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"peer {self.path}".encode()
        if self.path == "/headers":
            body = str(self.headers).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@asynccontextmanager
async def http_peer() -> AsyncIterator[int]:
    """Start the peer; yield its port; stop it."""
    async with await anyio.open_process(
        [sys.executable, "-I", "-c", _SERVER], stdout=subprocess.PIPE, stderr=None
    ) as process:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(60):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        try:
            yield int(line)
        finally:
            process.kill()
