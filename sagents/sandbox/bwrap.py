"""Building the bubblewrap command line (a leaf that touches the OS only to look at paths).

What the sandbox sees (issue 4 §1): ``/usr`` and the merged-usr symlinks, a short list of
harmless ``/etc`` files, the Python runtime at its own path (pyenv's lives under ``/root``,
mode 700, so it is bound by itself, nothing else of ``/root``), the workspace (read-write, or
read-only in ``read_only`` mode) with ``.agent`` and the other read-only sub-paths bound
read-only over it, a size-bounded private ``/tmp`` and ``/dev/shm`` (``--size``, bubblewrap
>= 0.8), a new ``/proc`` with ``/proc/sys`` read-only, and a minimal read-only ``/dev``.
Every namespace is unshared (no network), the child gets a new session and dies with its
parent, and the environment is cleared and rebuilt from an allowlist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

from sagents.errors import SandboxUnavailableError
from sagents.sandbox.types import ReadOnlyBind

__all__ = [
    "ETC_FILES",
    "INSTALL_HINT",
    "LAUNCHER_PROBE_ENV",
    "REQUIRED_OPTIONS",
    "BindFd",
    "build_bwrap_argv",
    "find_bwrap",
    "python_runtime",
]

INSTALL_HINT = (
    "install bubblewrap: apt-get install bubblewrap (or: sudo apt-get install bubblewrap)"
)
# /etc entries programs need (name resolution, TLS roots, dynamic linker, locale); no secrets.
ETC_FILES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "passwd",
    "protocols",
    "services",
    "ssl",
)
# Options this module relies on; --size and --ro-bind-fd arrived in bubblewrap 0.8.
REQUIRED_OPTIONS = ("--size", "--ro-bind-fd", "--bind-fd", "--cap-drop", "--remount-ro")
LAUNCHER_PROBE_ENV = {"PATH": "/usr/bin:/bin"}
BindFd = tuple[int, str]
"""A directory descriptor (opened ``O_NOFOLLOW``) and where it appears inside."""


def find_bwrap() -> str:
    """Return the path of a working ``bwrap``.

    Raises:
        SandboxUnavailableError: when bubblewrap is missing or cannot create namespaces here;
            the hint says how to install it. There is no fallback to ``passthrough``.
    """
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailableError(
            "the 'local' sandbox needs bubblewrap ('bwrap'), which is not installed",
            hint=INSTALL_HINT,
        )
    usage = subprocess.run(
        [path, "--help"], capture_output=True, env=LAUNCHER_PROBE_ENV, check=False, timeout=30
    ).stdout.decode(errors="replace")
    missing = [option for option in REQUIRED_OPTIONS if option not in usage]
    if missing:
        raise SandboxUnavailableError(
            f"bubblewrap at {path!r} is too old: it lacks {', '.join(missing)} "
            "(bubblewrap >= 0.8 is required)",
            hint="upgrade bubblewrap: apt-get install --only-upgrade bubblewrap",
        )
    probe = subprocess.run(
        [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        env=LAUNCHER_PROBE_ENV,
        check=False,
        timeout=30,
    )
    if probe.returncode != 0:
        raise SandboxUnavailableError(
            f"bubblewrap at {path!r} cannot create a sandbox here: "
            f"{probe.stderr.decode(errors='replace').strip()}",
            hint="enable unprivileged user namespaces or run as root; " + INSTALL_HINT,
        )
    return path


def python_runtime() -> tuple[str, str]:
    """Return ``(prefix, interpreter)``: the base Python installation and its executable.

    The prefix is ``sys.base_prefix`` with symlinks resolved (a venv's own prefix holds only
    symlinks to it); it is bound read-only at the same path inside the sandbox.
    """
    prefix = os.path.realpath(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in (version, "python3"):
        candidate = os.path.join(prefix, "bin", name)
        if os.path.exists(candidate):
            return prefix, candidate
    return prefix, os.path.realpath(sys.executable)


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{top}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    for name in ETC_FILES:
        host = f"/etc/{name}"
        if os.path.lexists(host):
            args += ["--ro-bind-try", host, host]
    return args


def build_bwrap_argv(
    *,
    bwrap: str,
    argv: Sequence[str],
    workspace_fd: int,
    workspace_path: str,
    workspace_writable: bool,
    read_only_fds: Sequence[BindFd],
    extra_ro_binds: Sequence[ReadOnlyBind],
    tmp_size_bytes: int | None,
    env: Mapping[str, str],
    cwd: str,
    seccomp_fd: int | None = None,
) -> list[str]:
    """Return the full ``bwrap ... -- argv`` command line.

    Args:
        bwrap: The bubblewrap executable.
        argv: The program and its arguments, as seen inside.
        workspace_fd: The workspace directory, opened ``O_NOFOLLOW`` (``--bind-fd``); the
            descriptor must be passed to bwrap (``pass_fds``).
        workspace_path: Where the workspace appears inside.
        workspace_writable: False binds it read-only.
        read_only_fds: Directories bound read-only over parts of the workspace (``.agent``);
            their descriptors must be passed to bwrap as well.
        extra_ro_binds: Host paths bound read-only.
        tmp_size_bytes: Size of each of the private ``/tmp`` and ``/dev/shm`` tmpfs, or
            None for the kernel default.
        env: The complete environment of the program (after ``--clearenv``).
        cwd: The working directory inside.
        seccomp_fd: A descriptor (passed to bwrap) to read the seccomp filter from, see
            :mod:`sagents.sandbox.seccomp`; None installs none.
    """
    prefix, _ = python_runtime()
    # --cap-drop ALL: as uid 0 inside, bubblewrap would otherwise keep every capability of the
    # new user namespace, enough to remount the read-only binds read-write.
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += _system_args()
    args += ["--ro-bind", prefix, prefix]
    # Without a user namespace (bubblewrap started by root) the program is the host's uid 0,
    # and sysctl writes check only the uid: /proc/sys must be read-only, or it could set
    # kernel.core_pattern and have the host kernel run a workspace file as root.
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    # /tmp and /dev/shm are size-bounded tmpfs; /dev itself (a tmpfs) is made read-only.
    for tmpfs in ("/tmp", "/dev/shm"):
        if tmp_size_bytes is not None:
            args += ["--size", str(tmp_size_bytes)]
        args += ["--tmpfs", tmpfs]
    args += ["--remount-ro", "/dev"]
    bind = "--bind-fd" if workspace_writable else "--ro-bind-fd"
    args += [bind, str(workspace_fd), workspace_path]
    for fd, dest in read_only_fds:
        args += ["--ro-bind-fd", str(fd), dest]
    for extra in extra_ro_binds:
        args += ["--ro-bind", extra.host_path, extra.sandbox_path]
    args += ["--remount-ro", "/"]  # the sandbox's own root tmpfs: nothing to write there
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", cwd, "--", *argv]
    return args
