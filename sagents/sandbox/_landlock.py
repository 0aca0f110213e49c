"""Keeping a sandbox that shares the host's network away from the host's abstract Unix sockets
(a leaf that touches the OS).

A sandbox with the network on keeps the host's network namespace, and abstract Unix sockets
(``\\0name``, no file behind them) belong to the network namespace, not to the file system: a
program could connect to every one the host listens on (D-Bus, X11, container runtimes, other
sagents processes). Landlock's scoping (Linux 6.12, Landlock ABI 6,
``LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET``; kernel documentation, "Landlock: unprivileged access
control", "IPC scoping") refuses a process in a Landlock domain any connection to an abstract
socket created outside it, while sockets its own tree creates keep working, and TCP/UDP are not
touched.

A domain can only be entered by the process itself, so the program is started through
:data:`SCOPE_SCRIPT`: the sandbox's Python enters the domain (``no_new_privs`` first, as
Landlock requires of an unprivileged process), then ``execv`` s the program; the domain is kept
across ``execve`` and inherited by every child.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["SCOPE_SCRIPT", "abstract_unix_scope_supported", "scoped_argv"]

_CREATE_RULESET = 444  # landlock_create_ruleset: the same number on every architecture
_CREATE_RULESET_VERSION = 1  # flag: answer the ABI version instead of creating a ruleset
SCOPE_ABI = 6  # the first ABI with LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET

SCOPE_SCRIPT = """\
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(step):
    sys.stderr.write(f"sagents: {step} failed: {os.strerror(ctypes.get_errno())}\\n")
    sys.exit(126)
# struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped
attr = struct.pack("=QQQ", 0, 0, 1)  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    fail("prctl(PR_SET_NO_NEW_PRIVS)")
fd = libc.syscall(444, attr, len(attr), 0)  # landlock_create_ruleset
if fd < 0:
    fail("landlock_create_ruleset")
if libc.syscall(446, fd, 0) != 0:  # landlock_restrict_self
    fail("landlock_restrict_self")
os.close(fd)
os.execv(sys.argv[1], sys.argv[2:])
"""
"""Run as ``python -I -S -c SCOPE_SCRIPT <program path> <argv0> <args...>``."""


@functools.cache
def abstract_unix_scope_supported() -> bool:
    """Whether this kernel can scope abstract Unix sockets (Landlock ABI >= 6, enabled).

    Probed once per process (the kernel does not change under it).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    return isinstance(abi, int) and abi >= SCOPE_ABI


def scoped_argv(python: str, program: str, argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` (``program`` is ``argv[0]`` resolved) in a Landlock
    domain that refuses the host's abstract Unix sockets.

    Args:
        python: An interpreter visible inside the sandbox.
        program: The absolute path of the program inside the sandbox.
        argv: The program's argument vector, ``argv[0]`` included.
    """
    if not os.path.isabs(program):
        raise ValueError(f"program {program!r} must be an absolute path")
    return [python, "-I", "-S", "-c", SCOPE_SCRIPT, program, *argv]
