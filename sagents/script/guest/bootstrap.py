"""run_script bootstrap, run as ``python -I <runtime>/bootstrap.py <script.py>``. STDLIB ONLY.

Loads the protocol module and ``agent_tools`` from this file's own directory by exact path and
registers them in ``sys.modules`` before the script runs, so that a workspace file named
``agent_tools.py`` cannot shadow the helper. Moves the request/reply descriptors to fds 3 and 4
when the launcher passed them elsewhere (``SAGENTS_SCRIPT_FDS``), then runs the script as
``__main__`` with the workspace (the current directory) first on ``sys.path``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import runpy
import sys
import traceback
from types import ModuleType, TracebackType

__all__: list[str] = []

_HERE = os.path.dirname(os.path.abspath(__file__))
_FDS_ENV = "SAGENTS_SCRIPT_FDS"


def _load(name: str, filename: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, filename))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {filename!r} from {_HERE!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _move_fds() -> None:
    value = os.environ.get(_FDS_ENV)
    if value is None:
        return
    request_fd, reply_fd = (int(part) for part in value.split(","))
    if (request_fd, reply_fd) == (3, 4):
        return
    spare_request = fcntl.fcntl(request_fd, fcntl.F_DUPFD_CLOEXEC, 10)
    spare_reply = fcntl.fcntl(reply_fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(request_fd)
    os.close(reply_fd)
    os.dup2(spare_request, 3)
    os.dup2(spare_reply, 4)
    os.close(spare_request)
    os.close(spare_reply)
    os.environ[_FDS_ENV] = "3,4"


def _user_frames(tb: TracebackType | None, script: str) -> TracebackType | None:
    """The traceback from the script's first frame on, without the frames of the helper files
    of this directory (``agent_tools`` internals): the user's frames only."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != script:
        start = start.tb_next
    if start is None:
        return tb
    kept = []
    node: TracebackType | None = start
    while node is not None:
        if os.path.dirname(os.path.abspath(node.tb_frame.f_code.co_filename)) != _HERE:
            kept.append(node)
        node = node.tb_next
    for before, after in zip(kept, [*kept[1:], None], strict=True):
        before.tb_next = after
    return kept[0] if kept else start


def _main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: bootstrap.py SCRIPT [ARGS...]")
    script = os.path.abspath(sys.argv[1])
    _move_fds()
    _load("_sagents_script_protocol", "agent_tools_protocol.py")
    _load("agent_tools", "agent_tools.py")
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.getcwd())
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a TextIOWrapper
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001  # the script's own failure, reported below
        traceback.print_exception(type(error), error, _user_frames(error.__traceback__, script))
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    _main()
