"""``SandboxSkillManager``: projects a session's skills into its sandbox, lazily and safely.

Skills are copied through the sandbox's own file API (never the host filesystem), so the same code
serves a local bubblewrap sandbox, an in-memory one and a remote one. A skill is copied when it is
loaded (``load``/``project``), not every skill for every session, to
``<root>/<skill name>/`` (default root :data:`DEFAULT_SANDBOX_SKILLS_ROOT`).

Sync rule (a three-way merge per file, whose base is a manifest of SHA-256 hashes written beside
the copy, ``<root>/<name>/.sagents-manifest.json``, holding what was last copied):

* missing in the sandbox: copy the host file (``created``);
* same bytes: nothing (``unchanged``);
* different, and the sandbox file still equals the base: the host changed, so the host file is
  copied (``updated``);
* different, and the host file still equals the base: the user edited it, so it is kept
  (``kept_local_edit``);
* different, and both changed (or there is no base): the user's file is kept, the host's is
  written beside it as ``<file>.from-host`` and a warning is logged (``conflict``); the base
  becomes the host's version, so the conflict is reported once per host change.

So neither a user's edit inside the sandbox nor an update of the host copy is lost silently. Files
the user added in the sandbox are left alone; files removed on the host are left in the sandbox.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import posixpath
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio

from sagents.skill._disclosure import LoadedSkill, load_skill, read_skill_file_bytes, require_skill
from sagents.skill._proxy import SkillSource
from sagents.skill._schema import SkillSchema

__all__ = [
    "CONFLICT_SUFFIX",
    "DEFAULT_SANDBOX_SKILLS_ROOT",
    "MANIFEST_NAME",
    "SandboxFiles",
    "SandboxSkillManager",
    "SkillProjection",
    "SyncOutcome",
]

DEFAULT_SANDBOX_SKILLS_ROOT = ".skills"  # a sandbox path, relative to the sandbox workspace
MANIFEST_NAME = ".sagents-manifest.json"
CONFLICT_SUFFIX = ".from-host"

SyncOutcome = Literal["created", "unchanged", "updated", "kept_local_edit", "conflict"]

logger = logging.getLogger(__name__)


class SandboxFiles(Protocol):
    """The part of the sandbox's file API that projection needs (sandbox paths, not host paths).

    Paths are absolute sandbox paths or relative to the sandbox's workspace. The sandbox
    package's ``Sandbox`` protocol satisfies this structurally (its ``write_file``/``mkdir``
    return the resolved path, which is ignored here).
    """

    async def read_file(self, path: str) -> bytes:
        """Read a whole file."""
        ...

    async def write_file(self, path: str, data: bytes) -> object:
        """Write a whole file (atomically), creating or replacing it; the result is ignored."""
        ...

    async def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    async def mkdir(self, path: str) -> object:
        """Create a directory whose parent exists; the result is ignored."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillProjection:
    """What one projection of a skill did.

    Attributes:
        name: The skill's name.
        sandbox_path: Where the skill's files are inside the sandbox.
        outcomes: Per file (relative POSIX path), what happened (see the module's table).
        conflicts: The files where both sides changed; the host version is beside each one at
            ``<file>.from-host``.
        manifest_reset: Whether an unreadable manifest was replaced (every differing file is
            then a conflict, never an overwrite).
    """

    name: str
    sandbox_path: str
    outcomes: dict[str, SyncOutcome] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()
    manifest_reset: bool = False


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class SandboxSkillManager:
    """Copies a session's skills into its sandbox when they are loaded.

    Args:
        skills: The session's ``SkillProxy`` (or a ``SkillManager``).
        files: The sandbox's file API (see :class:`SandboxFiles`).
        root: The sandbox directory under which each skill gets ``<root>/<name>/``.

    Raises:
        ValueError: ``root`` is empty.
    """

    def __init__(
        self,
        skills: SkillSource,
        files: SandboxFiles,
        *,
        root: str = DEFAULT_SANDBOX_SKILLS_ROOT,
    ) -> None:
        if not root.strip():
            raise ValueError(
                "root must name a sandbox directory (default '.skills'); an empty root would "
                "put skills at the sandbox's filesystem root"
            )
        self._skills = skills
        self._files = files
        self._root = root.rstrip("/") or "/"
        self._lock = anyio.Lock()

    @property
    def root(self) -> str:
        """The sandbox directory holding projected skills."""
        return self._root

    def sandbox_path(self, name: str) -> str:
        """Where skill ``name`` is (or will be) inside the sandbox."""
        return posixpath.join(self._root, name)

    async def load(self, name: str) -> LoadedSkill:
        """Project the skill, then load it with its sandbox location (``load_skill``'s job).

        Raises:
            SkillNotFoundError: The session has no such skill.
        """
        await self.project(name)
        return load_skill(self._skills, name, location=self.sandbox_path(name))

    async def project(self, name: str) -> SkillProjection:
        """Copy skill ``name`` into the sandbox by the module's sync rule.

        Raises:
            SkillNotFoundError: The session has no such skill (the hint lists the names).
        """
        skill = require_skill(self._skills, name)
        async with self._lock:
            return await self._project(skill)

    async def _ensure_dir(self, path: str, made: set[str]) -> None:
        if path in made or path in ("", "/"):
            return
        parent = posixpath.dirname(path)
        if parent != path:
            await self._ensure_dir(parent, made)
        if not await self._files.exists(path):
            await self._files.mkdir(path)
        made.add(path)

    async def _read_manifest(self, path: str) -> tuple[dict[str, str], bool]:
        if not await self._files.exists(path):
            return {}, False
        try:
            data = json.loads(await self._files.read_file(path))
            files = data["files"]
            if isinstance(files, dict) and all(isinstance(v, str) for v in files.values()):
                return {str(k): v for k, v in files.items()}, False
        except (ValueError, KeyError, TypeError):
            pass  # reported through manifest_reset; every differing file becomes a conflict
        logger.warning("skill manifest %s is unreadable; differing files become conflicts", path)
        return {}, True

    async def _project(self, skill: SkillSchema) -> SkillProjection:
        base_dir = self.sandbox_path(skill.name)
        made: set[str] = set()
        await self._ensure_dir(base_dir, made)
        manifest_path = posixpath.join(base_dir, MANIFEST_NAME)
        manifest, reset = await self._read_manifest(manifest_path)
        outcomes: dict[str, SyncOutcome] = {}
        for relative in skill.files:
            read = functools.partial(read_skill_file_bytes, skill, relative, max_bytes=None)
            host = await anyio.to_thread.run_sync(read)
            target = posixpath.join(base_dir, relative)
            await self._ensure_dir(posixpath.dirname(target), made)
            outcome = await self._sync_file(target, host, manifest.get(relative))
            outcomes[relative] = outcome
            manifest[relative] = _sha256(host)
        document = {"version": 1, "skill": skill.name, "files": dict(sorted(manifest.items()))}
        await self._files.write_file(manifest_path, json.dumps(document, indent=1).encode())
        conflicts = tuple(path for path, outcome in outcomes.items() if outcome == "conflict")
        for path in conflicts:
            logger.warning(
                "skill %r: %s was changed both in the sandbox and on the host; the sandbox "
                "copy is kept and the host's is at %s%s",
                skill.name,
                path,
                path,
                CONFLICT_SUFFIX,
            )
        return SkillProjection(
            name=skill.name,
            sandbox_path=base_dir,
            outcomes=outcomes,
            conflicts=conflicts,
            manifest_reset=reset,
        )

    async def _sync_file(self, target: str, host: bytes, base: str | None) -> SyncOutcome:
        if not await self._files.exists(target):
            await self._files.write_file(target, host)
            return "created"
        current = await self._files.read_file(target)
        if current == host:
            return "unchanged"
        current_hash, host_hash = _sha256(current), _sha256(host)
        if base is not None and base == current_hash:
            await self._files.write_file(target, host)
            return "updated"
        if base is not None and base == host_hash:
            return "kept_local_edit"
        await self._files.write_file(target + CONFLICT_SUFFIX, host)
        return "conflict"
