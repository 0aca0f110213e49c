"""Which host uid a ``local`` sandbox's programs run as, and its access to the workspace (a
leaf that touches the OS).

Started by root, bubblewrap would run programs as the host's uid 0, and file modes would then
protect nothing (docs/sandbox.md, "Who the program is"). So when sagents runs as root, programs
run as an unprivileged uid instead:

- the uid :class:`~sagents.sandbox._types.SandboxParams` names (``sandbox_uid``), else
- the owner of the workspace directory when that is not root (``/home/alice/project`` runs as
  alice: what a script writes there is hers), else
- :data:`~sagents.sandbox._types.DEFAULT_SANDBOX_UID`.

That uid must be able to write the workspace directory. A directory that sagents created is
given to it (``chown``); an existing one keeps its owner and mode and gets one POSIX ACL entry
granting that uid ``rwx`` on the directory itself (what is already inside is not changed).
"""

from __future__ import annotations

import errno
import os
import struct

from sagents.errors import SandboxError
from sagents.sandbox._types import DEFAULT_SANDBOX_UID

__all__ = ["grant_workspace", "sandbox_identity"]

_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = (
    0x01,
    0x02,
    0x04,
    0x08,
    0x10,
    0x20,
)
_ACL_UNDEFINED_ID = 0xFFFFFFFF
_ENTRY = struct.Struct("<HHI")


def sandbox_identity(workspace: str, sandbox_uid: int | None) -> tuple[int, int] | None:
    """``(uid, gid)`` programs switch to, or None to keep the caller's (not root, or
    ``sandbox_uid=0``)."""
    if os.geteuid() != 0 or sandbox_uid == 0:
        return None
    if sandbox_uid is not None:
        return sandbox_uid, sandbox_uid
    st = os.stat(workspace)
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    return DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID


def _acl_entries(path: str, mode: int) -> list[tuple[int, int, int]]:
    try:
        data = os.getxattr(path, _ACL_XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP):
            raise
        data = b""
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == _ACL_VERSION:
        return [_ENTRY.unpack_from(data, 4 + i) for i in range(0, len(data) - 4, _ENTRY.size)]
    return [
        (_ACL_USER_OBJ, (mode >> 6) & 7, _ACL_UNDEFINED_ID),
        (_ACL_GROUP_OBJ, (mode >> 3) & 7, _ACL_UNDEFINED_ID),
        (_ACL_OTHER, mode & 7, _ACL_UNDEFINED_ID),
    ]


def grant_workspace(workspace: str, identity: tuple[int, int], *, created: bool) -> None:
    """Let ``identity`` write the workspace directory (see the module docstring).

    Args:
        workspace: The workspace's real host path.
        identity: ``(uid, gid)`` the programs run as.
        created: True when sagents has just created the directory (it is then given away).

    Raises:
        SandboxError: the filesystem has no POSIX ACLs (the hint says what to do instead).
    """
    uid, gid = identity
    st = os.stat(workspace)
    if st.st_uid == uid:
        return
    if created:
        os.chown(workspace, uid, gid)
        return
    entries = [e for e in _acl_entries(workspace, st.st_mode) if e[:3:2] != (_ACL_USER, uid)]
    entries = [e for e in entries if e[0] != _ACL_MASK]
    entries += [(_ACL_USER, 7, uid), (_ACL_MASK, 7, _ACL_UNDEFINED_ID)]
    entries.sort(key=lambda e: (e[0], e[2]))
    data = struct.pack("<I", _ACL_VERSION) + b"".join(_ENTRY.pack(*e) for e in entries)
    try:
        os.setxattr(workspace, _ACL_XATTR, data)
    except OSError as exc:
        raise SandboxError(
            f"the sandbox's uid {uid} cannot write the workspace {workspace!r} "
            f"(owned by uid {st.st_uid}) and no ACL entry could be added: {exc.strerror}",
            hint=f"chown {uid} {workspace}, or choose the uid with SandboxParams.sandbox_uid",
        ) from exc
