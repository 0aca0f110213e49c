"""Building the bubblewrap command line (a leaf that touches the OS only to look at paths).

What the sandbox sees (docs/sandbox.md): ``/usr`` and the merged-usr symlinks, a short
allowlist of world-readable ``/etc`` *files* (never whole directories), a ``passwd`` and a
``group`` written by sagents (the host's user list is not shown), the Python runtime at its own
path (pyenv's lives under ``/root``, mode 700, so it is bound by itself, below directories
created world-traversable, nothing else of ``/root``), the workspace (read-write, or read-only
in ``read_only`` mode) with ``.agent`` and the other read-only sub-paths bound read-only over
it, a size-bounded private ``/tmp`` and ``/dev/shm`` (``--size``, bubblewrap >= 0.8), a new
``/proc`` with ``/proc/sys`` read-only, and a minimal read-only ``/dev``. Every namespace is
unshared (a sandbox with network reaches the outside only through the egress proxy's socket,
bound in: :mod:`sagents.sandbox._egress`), the child gets a new session and dies with its
parent, and the environment is cleared and rebuilt from an allowlist.

Started by root, bubblewrap maps the sandbox's uid 0 to the host's uid 0, so file modes would
not protect anything: a root-owned ``0600`` file in a bound directory would be readable. With
``run_as`` the sandbox is built without a user namespace and the program is started through
``setpriv``, which switches to that unprivileged host uid and gid (no supplementary groups, no
capability left, empty bounding set) before it execs the program; bubblewrap keeps only the
few capabilities that step needs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat as stat_mod
import subprocess
import sys
from collections.abc import Mapping, Sequence

from sagents.errors import SandboxUnavailableError
from sagents.sandbox._egress import EGRESS_SOCKET_PATH
from sagents.sandbox._types import ReadOnlyBind, ReadWriteBind

__all__ = [
    "ETC_FILES",
    "ETC_SYMLINK_DIRS",
    "INSTALL_HINT",
    "LAUNCHER_PROBE_ENV",
    "REQUIRED_OPTIONS",
    "SETPRIV_PATHS",
    "BindFd",
    "build_bwrap_argv",
    "find_bwrap",
    "find_setpriv",
    "identity_files",
    "python_runtime",
]

INSTALL_HINT = (
    "install bubblewrap: apt-get install bubblewrap (or: sudo apt-get install bubblewrap)"
)
# /etc files programs need (name resolution, TLS roots, dynamic linker, time zone, MIME
# types). Files only, never directories, and each only when it is a world-readable regular
# file: a directory could hold a secret added later (/etc/ssl/private is one).
ETC_FILES = (
    "host.conf",
    "hosts",
    "ld.so.cache",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "protocols",
    "services",
    "ssl/certs/ca-certificates.crt",
    "ssl/openssl.cnf",
)
# /etc/alternatives holds the symlinks behind some /usr/bin commands: recreated, not bound.
ETC_SYMLINK_DIRS = ("alternatives",)
# A link to a manual page (``.../man/man7/ABORT.7.gz``, ``.../man/mvn.1.gz``) is not recreated:
# they are most of /etc/alternatives (PostgreSQL alone adds over 200), each a step of
# bubblewrap's at every start (about 15 ms for 320 of them), and ``man`` does not run in a
# sandbox anyway (no /etc/manpath.config). The pages behind them dangle inside.
_MANUAL_PAGE = re.compile(r"/man/(?:[^/]+/)?man[0-9n][^/]*/[^/]+$|/man/[^/]+\.[0-9n][^/]*$")
SETPRIV_PATHS = ("/usr/bin/setpriv", "/usr/sbin/setpriv")  # util-linux, inside /usr
# Kept by bubblewrap for the setpriv step only (setpriv gives them all up before the program
# runs); CAP_DAC_READ_SEARCH lets bubblewrap (root) enter a workspace of mode 0700 owned by the
# sandbox's uid.
_DROP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH")
_NAMESPACES_WITHOUT_USER = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
# Options this module relies on; --size and --ro-bind-fd arrived in bubblewrap 0.8.
REQUIRED_OPTIONS = ("--size", "--ro-bind-fd", "--bind-fd", "--cap-drop", "--remount-ro")
LAUNCHER_PROBE_ENV = {"PATH": "/usr/bin:/bin"}
BindFd = tuple[int, str]
"""A directory descriptor (opened ``O_NOFOLLOW``) and where it appears inside."""


def find_bwrap() -> str:
    """Return the path of a working ``bwrap``.

    The probe (its options, then one sandbox of ``true``) runs once per process and
    bubblewrap binary: a later call with the same ``bwrap`` (same path, inode and mtime) is
    answered from that first result. A failed probe is not remembered, so that installing
    bubblewrap or enabling user namespaces takes effect at once.

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
    st = os.stat(path)
    return _probed_bwrap(path, st.st_ino, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _probed_bwrap(path: str, inode: int, mtime_ns: int) -> str:
    """Probe the bubblewrap at ``path`` (``inode`` and ``mtime_ns`` key the cache only)."""
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
    made: list[str] = []
    for name in (*ETC_FILES, "passwd"):
        args += _parent_dirs(f"/etc/{name}", (), made)
    for name in ETC_SYMLINK_DIRS:
        args += _parent_dirs(f"/etc/{name}/.", (), made)
    for name in ETC_FILES:
        host = f"/etc/{name}"
        if _world_readable_file(host):
            args += ["--ro-bind", host, host]
    for name in ETC_SYMLINK_DIRS:
        args += _symlinks_of(f"/etc/{name}")
    return args


_SYMLINKS: dict[str, tuple[tuple[int, int, int], list[str]]] = {}


def _symlinks_of(top: str) -> list[str]:
    """``--symlink`` arguments recreating the symlinks of the directory ``top``.

    Read again only when the directory changed (its inode, mtime or ctime: adding, removing or
    replacing an entry changes them); ``/etc/alternatives`` holds hundreds of links, and reading
    them all cost each launch about 400 system calls. Links to manual pages are left out.
    """
    try:
        st = os.stat(top)
    except OSError:
        return []
    key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    cached = _SYMLINKS.get(top)
    if cached is not None and cached[0] == key:
        return cached[1]
    args: list[str] = []
    try:
        entries = sorted(os.listdir(top))
    except OSError:
        return []
    for entry in entries:
        link = f"{top}/{entry}"
        if os.path.islink(link):
            target = os.readlink(link)
            if not _MANUAL_PAGE.search(target):
                args += ["--symlink", target, link]
    _SYMLINKS[top] = (key, args)
    return args


def _world_readable_file(path: str) -> bool:
    try:
        st = os.stat(path)  # a symlink (/etc/localtime) is bound as its target
    except OSError:
        return False
    return stat_mod.S_ISREG(st.st_mode) and bool(st.st_mode & stat_mod.S_IROTH)


def find_setpriv() -> str | None:
    """The ``setpriv`` (util-linux) that drops to ``run_as`` inside the sandbox, or None."""
    for path in SETPRIV_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


def identity_files(uid: int, gid: int) -> tuple[bytes, bytes]:
    """``(passwd, group)`` shown at ``/etc/passwd`` and ``/etc/group`` inside: root, the
    sandbox's own user (``sandbox``, home ``/workspace``) and ``nobody``; nothing of the host's
    user list."""
    users = {0: ("root", 0, "/root"), 65534: ("nobody", 65534, "/nonexistent")}
    users.setdefault(uid, ("sandbox", gid, "/workspace"))
    groups = {0: "root", 65534: "nogroup"}
    groups.setdefault(gid, "sandbox")
    passwd = "".join(
        f"{name}:x:{number}:{group}:{name}:{home}:/bin/sh\n"
        for number, (name, group, home) in sorted(users.items())
    )
    group = "".join(f"{name}:x:{number}:\n" for number, name in sorted(groups.items()))
    return passwd.encode(), group.encode()


def _parent_dirs(path: str, mounted: Sequence[str], made: list[str]) -> list[str]:
    """``--perms 0755 --dir`` arguments for the ancestors of ``path`` that bubblewrap would
    otherwise create with the host parent's mode (``/root`` is 0700): ``/``, those at or below
    a ``mounted`` path and those already in ``made`` are left out; ``made`` is extended."""
    todo: list[str] = []
    parent = os.path.dirname(path.rstrip("/"))
    while parent not in ("", "/"):
        if parent not in made and not any(
            parent == top or parent.startswith(top + "/") for top in mounted
        ):
            todo.append(parent)
        parent = os.path.dirname(parent)
    args: list[str] = []
    for directory in reversed(todo):
        args += ["--perms", "0755", "--dir", directory]
        made.append(directory)
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
    run_as: tuple[int, int] | None = None,
    setpriv: str | None = None,
    data_fds: Sequence[BindFd] = (),
    extra_rw_binds: Sequence[ReadWriteBind] = (),
    egress_socket: str | None = None,
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
            :mod:`sagents.sandbox._seccomp`; None installs none.
        run_as: ``(uid, gid)`` of the host that the program runs as (bubblewrap started by
            root); None keeps bubblewrap's own user namespace (the caller's uid).
        setpriv: The ``setpriv`` executable (under ``/usr``); required with ``run_as``.
        data_fds: Descriptors (passed to bwrap) whose content is shown read-only at a path
            (``--ro-bind-data``): the ``passwd`` and ``group`` of :func:`identity_files`.
        extra_rw_binds: Host paths bound read-write (before the read-only ones, so that a
            read-only path inside a writable one stays read-only).
        egress_socket: The host path of the egress proxy's Unix socket, bound read-only at
            :data:`~sagents.sandbox._egress.EGRESS_SOCKET_PATH` (a sandbox with network; the
            caller starts ``argv`` behind the forwarder); None binds nothing. The network
            namespace is always the sandbox's own.
    """
    prefix, _ = python_runtime()
    if run_as is not None:
        if setpriv is None:
            raise ValueError("run_as needs setpriv")
        # No user namespace: the program must be a *host* uid other than root, which only a
        # uid change in the initial namespace gives.
        args = [bwrap, *_NAMESPACES_WITHOUT_USER, "--die-with-parent", "--new-session"]
        args += ["--cap-drop", "ALL"]
        for cap in _DROP_CAPS:
            args += ["--cap-add", cap]
    else:
        # --cap-drop ALL: as uid 0 inside, bubblewrap would otherwise keep every capability
        # of the new user namespace, enough to remount the read-only binds read-write.
        args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += _system_args()
    for fd, dest in data_fds:
        args += ["--perms", "0644", "--ro-bind-data", str(fd), dest]
    # bubblewrap creates the missing parents of a bind with the host parent's mode (/root is
    # 0700): create them world-traversable first, or an unprivileged uid could not reach them.
    mounted = ("/usr", "/etc", workspace_path, "/proc", "/dev")
    made: list[str] = []
    args += _parent_dirs(prefix, mounted, made)
    args += ["--ro-bind", prefix, prefix]
    # With sandbox_uid=0 the program is the host's uid 0 (no capability), and sysctl writes
    # check only the uid: /proc/sys must be read-only, or it could set kernel.core_pattern and
    # have the host kernel run a workspace file as root.
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    # /tmp and /dev/shm are size-bounded tmpfs; /dev itself (a tmpfs) is made read-only.
    for tmpfs in ("/tmp", "/dev/shm"):
        if tmp_size_bytes is not None:
            args += ["--size", str(tmp_size_bytes)]
        args += ["--perms", "1777", "--tmpfs", tmpfs]  # writable by the sandbox's uid
    args += ["--remount-ro", "/dev"]
    bind = "--bind-fd" if workspace_writable else "--ro-bind-fd"
    args += [bind, str(workspace_fd), workspace_path]
    for fd, dest in read_only_fds:
        args += ["--ro-bind-fd", str(fd), dest]
    # Their parents, after the /tmp tmpfs: a bind below /tmp gets world-traversable parents in
    # it too (the host's /tmp/pytest-of-root is 0700).
    shown = list(extra_ro_binds)
    if egress_socket is not None:
        shown.append(ReadOnlyBind(host_path=egress_socket, sandbox_path=EGRESS_SOCKET_PATH))
    for dest in (
        *(b.sandbox_path for b in extra_rw_binds),
        *(b.sandbox_path for b in shown),
    ):
        args += _parent_dirs(dest, mounted, made)
    for rw in extra_rw_binds:
        args += ["--bind", rw.host_path, rw.sandbox_path]
    for extra in shown:
        args += ["--ro-bind", extra.host_path, extra.sandbox_path]
    args += ["--remount-ro", "/"]  # the sandbox's own root tmpfs: nothing to write there
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", cwd, "--"]
    if run_as is not None:
        uid, gid = run_as
        args += [setpriv or "", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return [*args, *argv]
