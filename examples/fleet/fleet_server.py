"""The fleet MCP server of the example: the one bundled with sagents (``sagents.demo``).

Run it over stdio: ``python examples/fleet/fleet_server.py`` or
``python -m sagents.demo.fleet_server`` (see ``mcp_servers.json``).
"""

from sagents.demo.fleet_server import build_server

__all__ = ["build_server"]

if __name__ == "__main__":
    build_server().run("stdio")
