"""The guest runtime directory, ``<data dir>/script-runtime/`` (docs/run_script.md, "How it runs").

At startup the host writes three stdlib-only files there, copied from this package:
``bootstrap.py`` (the entry point), ``agent_tools.py`` (the helper) and
``agent_tools_protocol.py`` (a copy of :mod:`sagents.script.protocol`). The sandbox binds the
directory read-only; the bootstrap loads the other two by exact path.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["GUEST_FLAGS", "RUNTIME_FILES", "ScriptRuntime", "bootstrap_argv", "install_runtime"]

GUEST_FLAGS = ("-I", "-S", "-X", "utf8")
"""The interpreter options of every script (see :func:`bootstrap_argv`)."""

RUNTIME_FILES: dict[str, tuple[str, str]] = {
    "bootstrap.py": ("sagents.script.guest", "bootstrap.py"),
    "agent_tools.py": ("sagents.script.guest", "agent_tools.py"),
    "agent_tools_protocol.py": ("sagents.script", "protocol.py"),
}
"""Runtime file name → (package, resource) it is copied from."""


@dataclass(frozen=True, kw_only=True)
class ScriptRuntime:
    """An installed runtime directory.

    Attributes:
        directory: Host path of ``script-runtime/``.
        bootstrap: Host path of ``bootstrap.py`` in it.
    """

    directory: Path
    bootstrap: Path


def install_runtime(data_dir: Path) -> ScriptRuntime:
    """Write (or refresh) ``<data_dir>/script-runtime/`` and return its paths.

    Each file is written to a temporary name and renamed into place, read-only (0o444), so a
    script running meanwhile never sees a half-written helper. Unchanged files are left alone.

    Args:
        data_dir: The sagents data directory (see :func:`sagents.audit.default_data_dir`).

    Raises:
        OSError: when the directory cannot be created or written.
    """
    directory = data_dir / "script-runtime"
    directory.mkdir(parents=True, exist_ok=True)
    for name, (package, resource) in RUNTIME_FILES.items():
        content = resources.files(package).joinpath(resource).read_bytes()
        target = directory / name
        try:
            if target.read_bytes() == content:
                continue
        except FileNotFoundError:
            pass
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(content)
            os.chmod(temporary, 0o444)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return ScriptRuntime(directory=directory, bootstrap=directory / "bootstrap.py")


def bootstrap_argv(bootstrap: str, script: str, *, python: str | None = None) -> list[str]:
    """The command that runs ``script`` through the bootstrap.

    ``-I`` keeps PYTHON* variables, the user site and the current directory out of the
    interpreter's start-up; ``-S`` skips ``site``, so no ``.pth`` file of the interpreter runs
    (one that imports a package costs tens of milliseconds on every run); the bootstrap then
    adds the interpreter's ``site-packages`` and, last, the workspace to ``sys.path``.
    ``-X utf8`` makes the script's text I/O UTF-8 whatever the locale.

    Args:
        bootstrap: Path of ``bootstrap.py`` as the script's process sees it.
        script: Path of ``script.py`` as the script's process sees it.
        python: The interpreter; the host's own by default.
    """
    return [python or sys.executable, *GUEST_FLAGS, bootstrap, script]
