"""The guest runtime directory, ``<data dir>/script-runtime/`` (docs/run_script.md, "How it runs").

At startup the host writes three stdlib-only files there, copied from this package:
``bootstrap.py`` (the entry point), ``agent_tools.py`` (the helper) and
``agent_tools_protocol.py`` (a copy of :mod:`sagents.script._protocol`). The sandbox binds the
directory read-only; the bootstrap loads the other two by exact path.
"""

from __future__ import annotations

import functools
import importlib.util
import marshal
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = [
    "COMPILED_FILES",
    "GUEST_FLAGS",
    "RUNTIME_FILES",
    "ScriptRuntime",
    "bootstrap_argv",
    "install_runtime",
]

GUEST_FLAGS = ("-I", "-S", "-X", "utf8")
"""The interpreter options of every script (see :func:`bootstrap_argv`)."""

RUNTIME_FILES: dict[str, tuple[str, str]] = {
    "bootstrap.py": ("sagents.script._guest", "bootstrap.py"),
    "agent_tools.py": ("sagents.script._guest", "agent_tools.py"),
    "agent_tools_protocol.py": ("sagents.script", "_protocol.py"),
}
"""Runtime file name → (package, resource) it is copied from."""

COMPILED_FILES = ("agent_tools.py", "agent_tools_protocol.py")
"""Runtime files the bootstrap imports: their bytecode is written beside them at install, since
the sandbox binds the directory read-only and a script would otherwise compile them on every
run (``bootstrap.py`` itself runs as ``__main__``, which Python never caches)."""


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
            unchanged = target.read_bytes() == content
        except FileNotFoundError:
            unchanged = False
        if not unchanged:
            _write_read_only(directory, name, content)
        if name in COMPILED_FILES:
            _compile(directory, name, content)
    return ScriptRuntime(directory=directory, bootstrap=directory / "bootstrap.py")


def _write_read_only(directory: Path, name: str, content: bytes) -> None:
    """Write ``directory/name`` through a temporary file renamed into place, mode 0o444."""
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        os.chmod(temporary, 0o444)
        os.replace(temporary, directory / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _compile(directory: Path, name: str, content: bytes) -> None:
    """Write the bytecode of ``directory/name`` where the interpreter looks for it
    (``__pycache__/<name>.<tag>.pyc``), checked against the source's hash (PEP 552), so a
    stale or foreign file is never used: the interpreter then compiles the source instead."""
    source = directory / name
    cached = Path(importlib.util.cache_from_source(str(source)))
    data = _bytecode(content, str(source))
    try:
        if cached.read_bytes() == data:
            return
    except OSError:
        pass
    cached.parent.mkdir(exist_ok=True)
    _write_read_only(cached.parent, cached.name, data)


@functools.lru_cache(maxsize=8)
def _bytecode(content: bytes, filename: str) -> bytes:
    """The ``.pyc`` bytes of ``content`` (PEP 552: magic, flags (hash-based, checked), source
    hash, code). Compiled once per process and source: every run installs the runtime, and
    compiling the helper and the protocol took milliseconds of each run's start."""
    code = compile(content, filename, "exec", dont_inherit=True)
    return b"".join(
        (
            importlib.util.MAGIC_NUMBER,
            (0b11).to_bytes(4, "little"),
            importlib.util.source_hash(content),
            marshal.dumps(code),
        )
    )


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
