"""Host-side file operations confined to one directory, safe against symlink tricks.

A sandboxed program can write into the workspace, so it can plant a symlink wherever the host
is about to write (``output.txt`` → ``/etc/passwd``). Every host access here therefore walks the
path one component at a time from a directory descriptor, opening each component with
``O_NOFOLLOW``; a symlink met on the way is resolved *by us*, lexically, and followed only when
its target stays inside the root (docs/sandbox.md, "What the ``local`` sandbox
blocks": trick a host writer with a symlink). :func:`safe_open_in` is the primitive for host
writers (run_script's records);
:class:`HostFiles` is the file API of the ``local`` and ``passthrough`` providers.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat as stat_mod
import uuid
from collections.abc import Iterator

from sagents.errors import PathNotAllowedError
from sagents.sandbox._diskuse import directory_usage_bytes, open_dir_below
from sagents.sandbox._patterns import glob_regex
from sagents.sandbox._types import DirEntry, FileStat

__all__ = ["HostFiles", "open_dir_fd", "safe_open_in"]

MAX_SYMLINK_HOPS = 40  # as the kernel's MAXSYMLINKS
MAX_GLOB_RESULTS = 10_000  # a glob over a huge tree stops here
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir_fd(path: str) -> int:
    """Open a host directory for use as the ``dir_fd`` of :func:`safe_open_in`.

    Open it *before* the sandbox starts, so that a directory swapped in later cannot redirect
    host writes.

    Raises:
        PathNotAllowedError: when ``path`` is a symlink or not a directory.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        raise PathNotAllowedError(
            f"cannot open directory {path!r}: {exc.strerror}", details={"path": path}
        ) from exc


def _split_relative(relpath: str) -> list[str]:
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if relpath.startswith("/") or ".." in parts or not parts:
        raise PathNotAllowedError(
            f"{relpath!r} must be a relative path without '..'", details={"path": relpath}
        )
    return parts


def safe_open_in(dir_fd: int, relpath: str, flags: int, mode: int = 0o644) -> int:
    """Open ``relpath`` below ``dir_fd`` without following any symlink.

    Intermediate directories are opened with ``O_NOFOLLOW | O_DIRECTORY``; the last component
    with ``flags | O_NOFOLLOW | O_CLOEXEC``. Use it for every host write into a place the
    sandbox can write.

    Args:
        dir_fd: A directory descriptor (see :func:`open_dir_fd`).
        relpath: A relative path, ``/``-separated, without ``..``.
        flags: ``os.O_*`` flags for the final component (e.g. ``O_WRONLY | O_CREAT | O_EXCL``).
        mode: Permission bits when a file is created.

    Returns:
        A new descriptor the caller must close.

    Raises:
        PathNotAllowedError: for an absolute path, ``..``, or a symlink on the way.
        OSError: for other failures (missing file, exists with ``O_EXCL``, ...).
    """
    parts = _split_relative(relpath)
    current = dir_fd
    opened: list[int] = []
    try:
        for part in parts[:-1]:
            current = _open_component(current, part, _DIR_FLAGS, 0, relpath)
            opened.append(current)
        return _open_regular(current, parts[-1], flags, mode, relpath)
    finally:
        for fd in opened:
            os.close(fd)


def _open_component(dir_fd: int, name: str, flags: int, mode: int, whole: str) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
            raise PathNotAllowedError(
                f"{whole!r} goes through the symlink {name!r}; host writes never follow symlinks",
                details={"path": whole},
            ) from exc
        raise


def _open_regular(dir_fd: int, name: str, flags: int, mode: int, whole: str) -> int:
    """Open the last component: never a symlink, and never a FIFO or device, which could block
    the host in ``open`` or feed it endless data (``O_NONBLOCK`` until checked)."""
    nonblock = flags & os.O_NONBLOCK
    try:
        fd = _open_component(
            dir_fd, name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, whole
        )
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a FIFO without a reader, opened for writing
            raise
        raise PathNotAllowedError(
            f"{whole!r} is not a regular file or directory", details={"path": whole}
        ) from exc
    st_mode = os.fstat(fd).st_mode
    if not (stat_mod.S_ISREG(st_mode) or stat_mod.S_ISDIR(st_mode)):
        os.close(fd)
        raise PathNotAllowedError(
            f"{whole!r} is not a regular file or directory", details={"path": whole}
        )
    if not nonblock and not flags & os.O_PATH:
        os.set_blocking(fd, True)
    return fd


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat_mod.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _kind(mode: int) -> str:
    if stat_mod.S_ISREG(mode):
        return "file"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    return "other"


class HostFiles:
    """The file API over one host directory, addressed by sandbox paths.

    A sandbox path is absolute under ``sandbox_root`` (e.g. ``/workspace/a.txt``) or relative to
    it (``a.txt``). ``..`` that would leave the root, and symlinks whose target leaves it, raise
    :class:`~sagents.errors.PathNotAllowedError`; symlinks inside the root are followed (they
    are resolved here, never by the kernel). All methods are blocking: call them from a worker
    thread.

    Args:
        host_root: The host directory (must exist).
        sandbox_root: How the sandbox names it.
        writable: False refuses every change (``read_only`` mode).
        read_only_subpaths: Root-relative paths that refuse changes even when writable.
        owner: ``(uid, gid)`` given to the files and directories this API creates (the
            sandbox's uid, when sagents runs as root, so that its programs can change them);
            None leaves them to the caller.
    """

    def __init__(
        self,
        host_root: str,
        sandbox_root: str,
        *,
        writable: bool = True,
        read_only_subpaths: tuple[str, ...] = (),
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.host_root = os.path.realpath(host_root)
        self.sandbox_root = posixpath.normpath(sandbox_root)
        self.writable = writable
        self.read_only_subpaths = tuple(p.strip("/") for p in read_only_subpaths)
        self.owner = owner

    # -- resolution --------------------------------------------------------------------------

    def _relative_parts(self, path: str) -> list[str]:
        if not isinstance(path, str) or "\x00" in path:
            raise PathNotAllowedError(f"invalid path {path!r}", details={"path": repr(path)})
        full = path if path.startswith("/") else posixpath.join(self.sandbox_root, path)
        norm = posixpath.normpath(full)
        if norm.startswith("//"):
            norm = norm[1:]
        if norm != self.sandbox_root and not norm.startswith(self.sandbox_root.rstrip("/") + "/"):
            raise PathNotAllowedError(
                f"{path!r} is outside the sandbox root {self.sandbox_root!r}",
                hint="use a path inside the workspace",
                details={"path": path},
            )
        rel = norm[len(self.sandbox_root) :]
        return [p for p in rel.split("/") if p]

    def _sandbox_path(self, parts: list[str]) -> str:
        return posixpath.join(self.sandbox_root, *parts) if parts else self.sandbox_root

    def _resolve(self, path: str, *, follow_final: bool) -> tuple[int, str | None, list[str]]:
        """Walk to ``path``; return ``(parent_fd, final_name, parts)``; final_name None = root.

        The caller closes ``parent_fd``.
        """
        todo = self._relative_parts(path)
        done: list[str] = []
        hops = 0
        fd = os.open(self.host_root, _DIR_FLAGS)
        try:
            while todo:
                name = todo.pop(0)
                is_last = not todo
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    if is_last:
                        return fd, name, [*done, name]
                    raise
                if stat_mod.S_ISLNK(st.st_mode) and (follow_final or not is_last):
                    hops += 1
                    if hops > MAX_SYMLINK_HOPS:
                        raise PathNotAllowedError(f"too many symlinks in {path!r}")
                    target = os.readlink(name, dir_fd=fd)
                    base = self._sandbox_path(done)
                    joined = target if target.startswith("/") else posixpath.join(base, target)
                    try:
                        new_parts = self._relative_parts(joined)
                    except PathNotAllowedError:
                        raise PathNotAllowedError(
                            f"{path!r} goes through a symlink to {target!r}, outside the sandbox "
                            f"root {self.sandbox_root!r}",
                            details={"path": path},
                        ) from None
                    todo = new_parts + todo
                    done = []
                    os.close(fd)
                    fd = os.open(self.host_root, _DIR_FLAGS)
                    continue
                if is_last:
                    return fd, name, [*done, name]
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = next_fd
                done.append(name)
            return fd, None, done
        except BaseException:
            os.close(fd)
            raise

    def _check_writable(self, path: str, parts: list[str]) -> None:
        if not self.writable:
            raise PathNotAllowedError(f"{path!r}: the sandbox is read-only", details={"path": path})
        rel = "/".join(parts)
        for sub in self.read_only_subpaths:
            if rel == sub or rel.startswith(sub + "/"):
                raise PathNotAllowedError(
                    f"{path!r} is inside the read-only {sub!r}", details={"path": path}
                )

    # -- operations -----------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """Return the whole content of the file ``path``."""
        pfd, name, _ = self._resolve(path, follow_final=True)
        try:
            if name is None:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            fd = _open_regular(pfd, name, os.O_RDONLY, 0, path)
        finally:
            os.close(pfd)
        with os.fdopen(fd, "rb") as f:
            if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
            return f.read()

    def write_file(self, path: str, data: bytes) -> str:
        """Write ``data`` atomically (temp file + rename); return the sandbox path."""
        self._check_writable(path, self._relative_parts(path))
        pfd, name, parts = self._resolve(path, follow_final=True)
        try:
            self._check_writable(path, parts)
            if name is None:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            tmp = f".{name}.{uuid.uuid4().hex[:12]}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o644, dir_fd=pfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    if self.owner is not None:
                        os.fchown(f.fileno(), *self.owner)
                    f.write(data)
                os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            except BaseException:
                os.unlink(tmp, dir_fd=pfd)
                raise
            return self._sandbox_path(parts)
        finally:
            os.close(pfd)

    def stat(self, path: str) -> FileStat:
        """Return size, kind and mtime of ``path`` (symlinks inside the root are followed)."""
        pfd, name, parts = self._resolve(path, follow_final=True)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False) if name else os.fstat(pfd)
        finally:
            os.close(pfd)
        kind = _kind(st.st_mode)
        return FileStat(
            path=self._sandbox_path(parts),
            kind=kind,  # type: ignore[arg-type]  # _kind returns one of the Literal values
            size=st.st_size if kind == "file" else 0,
            mtime=st.st_mtime,
        )

    def exists(self, path: str) -> bool:
        """True when ``path`` exists inside the root (False for a path outside it)."""
        try:
            self.stat(path)
        except (FileNotFoundError, NotADirectoryError, PathNotAllowedError):
            return False
        return True

    def list_dir(self, path: str) -> list[DirEntry]:
        """List a directory, sorted by name; symlinks are listed as ``other``."""
        pfd, name, _ = self._resolve(path, follow_final=True)
        try:
            dfd = os.open(name, _DIR_FLAGS, dir_fd=pfd) if name else os.dup(pfd)
        finally:
            os.close(pfd)
        try:
            entries: list[DirEntry] = []
            with os.scandir(dfd) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    kind = _kind(st.st_mode)
                    entries.append(
                        DirEntry(
                            name=entry.name,
                            kind=kind,  # type: ignore[arg-type]  # one of the Literal values
                            size=st.st_size if kind == "file" else 0,
                        )
                    )
        finally:
            os.close(dfd)
        return sorted(entries, key=lambda e: e.name)

    def mkdir(self, path: str, *, parents: bool = True) -> str:
        """Create a directory (and its parents); an existing directory is fine."""
        parts = self._relative_parts(path)
        self._check_writable(path, parts)
        for depth in range(1 if parents else len(parts), len(parts) + 1):
            sub = self._sandbox_path(parts[:depth])
            pfd, name, resolved = self._resolve(sub, follow_final=True)
            try:
                self._check_writable(path, resolved)
                if name is not None:
                    try:
                        os.mkdir(name, 0o755, dir_fd=pfd)
                        if self.owner is not None:
                            os.chown(name, *self.owner, dir_fd=pfd, follow_symlinks=False)
                    except FileExistsError:
                        if not stat_mod.S_ISDIR(
                            os.stat(name, dir_fd=pfd, follow_symlinks=False).st_mode
                        ):
                            raise
            finally:
                os.close(pfd)
        return self._sandbox_path(parts)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, a symlink (not its target) or, with ``recursive``, a directory tree."""
        self._check_writable(path, self._relative_parts(path))
        pfd, name, parts = self._resolve(path, follow_final=False)
        try:
            self._check_writable(path, parts)
            if name is None:
                raise PathNotAllowedError(f"{path!r}: the root itself cannot be removed")
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if stat_mod.S_ISDIR(st.st_mode):
                if recursive:
                    shutil.rmtree(name, dir_fd=pfd)
                else:
                    os.rmdir(name, dir_fd=pfd)
            else:
                os.unlink(name, dir_fd=pfd)
        finally:
            os.close(pfd)

    def glob(self, pattern: str) -> list[str]:
        """Sandbox paths under the root matching ``pattern`` (relative to the root), sorted.

        ``**`` matches any number of directories; symlinks are listed but not descended into.
        """
        if pattern.startswith("/"):
            pattern = "/".join(self._relative_parts(pattern))
        if ".." in pattern.split("/"):
            raise PathNotAllowedError(f"glob pattern {pattern!r} may not contain '..'")
        regex = glob_regex(pattern)
        found: list[str] = []
        for rel in self._walk():
            if regex.fullmatch(rel):
                found.append(posixpath.join(self.sandbox_root, rel))
                if len(found) >= MAX_GLOB_RESULTS:
                    break
        return sorted(found)

    def _walk(self) -> Iterator[str]:
        """Relative paths under the root, depth first; directories are reopened from the root
        when their turn comes (at most three descriptors at a time, however wide the tree)."""
        root_fd = os.open(self.host_root, _DIR_FLAGS)
        try:
            todo: list[list[str]] = [[]]
            while todo:
                parts = todo.pop()
                try:
                    dfd = open_dir_below(root_fd, parts)
                except OSError:
                    continue  # vanished or replaced meanwhile: skip it
                try:
                    with os.scandir(dfd) as it:
                        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                finally:
                    os.close(dfd)
                prefix = "".join(f"{p}/" for p in parts)
                for name, is_dir in entries:
                    yield f"{prefix}{name}"
                    if is_dir:
                        todo.append([*parts, name])
        finally:
            os.close(root_fd)

    def usage_bytes(self) -> int:
        """Bytes used under the root, for the write-budget watchdog (see
        :func:`~sagents.sandbox._diskuse.directory_usage_bytes`: allocated blocks, and at least
        one block per entry; the walk never follows a symlink out of the root)."""
        return directory_usage_bytes(self.host_root)
