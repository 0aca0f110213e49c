"""The FastMCP proxy in front of one stdio server, served over stdio, for
``bench/bench_serve_proxy.py``.

Runs in ``bench/.venv-peers`` (``bench/setup-peers.sh``), never in the project's venv. Usage::

    bench/.venv-peers/bin/python bench/peers/fastmcp_proxy.py PYTHON SERVER_SCRIPT

``fastmcp.server.create_proxy`` on a ``StdioTransport`` of ``PYTHON SERVER_SCRIPT``, as the
FastMCP documentation shows a proxy of a local server; tools keep their names.
"""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

if __name__ == "__main__":
    python, script = sys.argv[1], sys.argv[2]
    proxy = create_proxy(StdioTransport(command=python, args=[script]), name="fastmcp-proxy")
    proxy.run(show_banner=False)
