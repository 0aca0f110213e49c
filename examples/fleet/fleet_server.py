"""The fleet MCP server of the example: the one bundled with sagents (``sagents.demo``).

Run it over stdio: ``python examples/fleet/fleet_server.py`` or
``python -m sagents.demo.fleet_server`` (see ``mcp_servers.json``).
"""

from sagents.demo.fleet_server import *  # noqa: F403  (the example's names, for its tests)
from sagents.demo.fleet_server import __all__, build_server

if __name__ == "__main__":
    build_server().run("stdio")
