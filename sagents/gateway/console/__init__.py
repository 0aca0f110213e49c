"""The gateway's web console at ``/console/`` (docs/console.md); floor 5, part of ``gateway``.

Pages: Runs, Run, Approvals, Background, Audit, Todo; live updates over Server-Sent Events from
the progress hub. :func:`console_for_gateway` builds it for ``sagents serve --transport http``;
:func:`build_console_app` with a :class:`ConsoleData` of disk paths only serves
``sagents console --data-dir DIR``.
"""

from sagents.gateway.console._app import CONSOLE_PATH, ConsoleData, build_console_app
from sagents.gateway.console._live import LiveRuns
from sagents.gateway.console._mount import console_for_gateway, data_dir_console

__all__ = [
    "CONSOLE_PATH",
    "ConsoleData",
    "LiveRuns",
    "build_console_app",
    "console_for_gateway",
    "data_dir_console",
]
