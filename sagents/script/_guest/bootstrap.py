"""run_script bootstrap, run as ``python -I -S <runtime>/bootstrap.py <script.py>``. STDLIB ONLY.

Loads ``agent_tools`` from this file's own directory by exact path and registers it in
``sys.modules`` before the script runs, so that a workspace file named ``agent_tools.py`` cannot
shadow the helper (the helper loads the protocol module the same way). Moves the request/reply
descriptors to fds 3 and 4 when the launcher passed them elsewhere (``SAGENTS_SCRIPT_FDS``),
then runs the script as ``__main__``.

Run as ``bootstrap.py --spare`` (a spare sandbox the host starts ahead of a run), it imports
what a run needs and then waits on fd 3 for the run: see :func:`_wait_for_run`.

What a script may import, in this order (docs/run_script.md): the standard library, then
``agent_tools``, then the packages of the interpreter's own ``site-packages`` (``-S``: no ``.pth``
file runs, so no package starts code at start-up), then the modules of the workspace (the
current directory), last: a workspace ``statistics.py`` or ``json.py`` cannot shadow the
standard library, an installed package or the helper.
"""

from __future__ import annotations

import builtins
import os
import sys

# The interpreter's own import machinery, already loaded at start-up: importing
# importlib.machinery would load the importlib package for nothing.
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import SourceFileLoader

# Start-up cost matters here (every run pays it): no runpy, importlib, types or traceback at
# import time; traceback is imported only when the script fails, fcntl only when descriptors
# must move.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType, TracebackType
    from typing import NoReturn

__all__: list[str] = []

_HERE = os.path.dirname(os.path.abspath(__file__))
_FDS_ENV = "SAGENTS_SCRIPT_FDS"
_SPARE_ARG = "--spare"  # instead of a script: a spare that waits on fd 3 for its run
_MAX_HANDOVER_BYTES = 1 << 20


def _load(name: str, filename: str) -> ModuleType:
    path = os.path.join(_HERE, filename)
    loader = SourceFileLoader(name, path)
    module = type(sys)(name)
    module.__spec__ = ModuleSpec(name, loader, origin=path)
    module.__spec__.has_location = True
    module.__loader__ = loader
    module.__file__ = path
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def _run_main(script: str) -> None:
    """Run ``script`` as ``__main__``, as ``python script.py`` would (``runpy.run_path``'s
    behaviour for a file, without importing runpy)."""
    with open(script, "rb") as file:
        code = compile(file.read(), script, "exec", dont_inherit=True)
    main = type(sys)("__main__")
    main.__file__ = script
    sys.modules["__main__"] = main
    exec(code, main.__dict__)  # running the user's script is the purpose; exec adds builtins


def _help(*args: object, **kwargs: object) -> None:
    """``help()`` as ``site`` would have added it (``-S``: it did not run), which run_script's
    description tells the model to call on a stubs module or function; pydoc is imported only
    when it is called."""
    import pydoc

    pydoc.help(*args, **kwargs)


def _exit(code: object = None) -> NoReturn:
    """``exit()`` and ``quit()`` as ``site`` would have added them: a script ends with them as
    it would under ``python script.py``."""
    raise SystemExit(code)


def _site_packages() -> list[str]:
    """The interpreter's own ``site-packages`` directories (``site`` did not run: ``-S``)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found: list[str] = []
    for prefix in dict.fromkeys((sys.base_prefix, sys.base_exec_prefix)):
        for lib in ("lib", "lib64"):
            path = os.path.join(prefix, lib, version, "site-packages")
            if os.path.isdir(path) and path not in found:
                found.append(path)
    if not found and os.path.isdir("/usr/lib/python3/dist-packages"):
        found.append("/usr/lib/python3/dist-packages")  # Debian's system Python
    return found


def _move_fds() -> None:
    value = os.environ.get(_FDS_ENV)
    if value is None:
        return
    request_fd, reply_fd = (int(part) for part in value.split(","))
    _place_fds(request_fd, reply_fd)


def _place_fds(request_fd: int, reply_fd: int) -> None:
    """Move the request and reply descriptors to fds 3 and 4."""
    if (request_fd, reply_fd) == (3, 4):
        return
    import fcntl

    spare_request = fcntl.fcntl(request_fd, fcntl.F_DUPFD_CLOEXEC, 10)
    spare_reply = fcntl.fcntl(reply_fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(request_fd)
    os.close(reply_fd)
    os.dup2(spare_request, 3)
    os.dup2(spare_reply, 4)
    os.close(spare_request)
    os.close(spare_reply)
    os.environ[_FDS_ENV] = "3,4"


def _wait_for_run() -> str:
    """A spare sandbox: wait for the run on fd 3 (a Unix socket from the host), after saying
    ``R`` (ready): the script's path and the run's variables (``KEY=value``), NUL-separated,
    and, passed with them (``SCM_RIGHTS``), the run's request and reply descriptors, which
    become fds 3 and 4. Returns the script's path; exits quietly when the host closes the
    socket without a run (a spare it dropped).

    Only the interpreter's C socket module is imported: every module loaded here would make the
    run's exit slower too (the interpreter tears each one down), so what a tool call needs is
    imported by the helper on first use, as in a cold start."""
    import _socket

    control = _socket.socket(fileno=3)
    try:  # noqa: SIM105  # contextlib would be one more module to tear down at exit
        control.send(b"R")
    except OSError:  # the host may have handed the run over already, and closed its end
        pass
    chunks: list[bytes] = []
    fds: list[int] = []
    size = 0
    space = _socket.CMSG_SPACE(8)  # two descriptors
    while size < _MAX_HANDOVER_BYTES:
        try:
            data, ancillary, _flags, _address = control.recvmsg(65536, space)
        except OSError:  # the host dropped this spare
            break
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds += [
                    int.from_bytes(payload[i : i + 4], sys.byteorder, signed=True)
                    for i in range(0, usable, 4)
                ]
        if not data:
            break
        chunks.append(data)
        size += len(data)
    control.detach()  # fd 3 is replaced below, or closed at exit
    if len(fds) != 2 or not chunks:
        os._exit(0)
    script, *variables = b"".join(chunks).decode("utf-8", "surrogateescape").split("\0")
    _place_fds(fds[0], fds[1])
    for variable in variables:
        key, _, value = variable.partition("=")
        os.environ[key] = value
    os.environ[_FDS_ENV] = "3,4"
    return script


def _user_frames(tb: TracebackType | None, script: str) -> TracebackType | None:
    """The traceback from the script's first frame on, without the frames of the helper files
    of this directory (``agent_tools`` internals): the user's frames only. None when the script
    has no frame in it (a SyntaxError: compiling it failed here), as ``python script.py``
    shows one: the error's own file, line and caret, no frames."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != script:
        start = start.tb_next
    if start is None:
        return None
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
    _load("agent_tools", "agent_tools.py")  # it loads its protocol module on first use
    if sys.argv[1] == _SPARE_ARG:
        script = _wait_for_run()
    else:
        script = os.path.abspath(sys.argv[1])
        _move_fds()
    sys.argv = [script, *sys.argv[2:]]
    sys.path.extend(_site_packages())
    sys.path.append(os.getcwd())
    # typeshed types these as site's _Helper and Quitter
    builtins.help = _help  # type: ignore[assignment]
    builtins.exit = builtins.quit = _exit  # type: ignore[assignment]
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a TextIOWrapper
    try:
        _run_main(script)
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001  # the script's own failure, reported below
        import traceback

        traceback.print_exception(type(error), error, _user_frames(error.__traceback__, script))
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    _main()
