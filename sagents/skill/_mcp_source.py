"""Skills of MCP servers as a skill source, listed at once and fetched on first use
(docs/skills.md, "Skills of an MCP server").

:class:`MCPSkillSource` reads each configured server's ``skills/list`` (the MCP Skills
extension) into a catalog: a skill's name, description and file list come from its entry, and
nothing else is downloaded. The first time a session needs a skill's content (``load_skill``,
a ``skill://`` read), :meth:`MCPSkillSource.fetch_skill` reads its files with
``resources/read``, verifies each one against the entry's ``sha256:`` digest and size and the
``SKILL.md`` front matter against the entry's ``frontmatter``, writes them under
``<cache>/<server>/<skill>/`` and parses that directory with the same parser as a local skill
root. Later reads are served from the copy until the server's listing changes the entry (an
announcement: the gateway relists on ``notifications/resources/list_changed`` and when the
server restarts) or a fetched file no longer matches its digest (the server is relisted once).
The copies are bounded (:data:`MAX_CACHED_SKILLS`, :data:`MAX_CACHED_BYTES`; the least
recently used are dropped first).

Names are namespaced by server as tools are: skill ``pdf-tools`` of server ``docs`` is
``docs__pdf-tools`` (:data:`~sagents.mcp.TOOL_NAME_SEPARATOR`); the skill's own name, checked
by the Agent Skills name rules, stays in its ``SKILL.md``. A server that is not ready, does not
answer its listing within its bound, or answers with an error hides only its own skills, with
the reason logged and kept in :meth:`MCPSkillSource.statuses` and :meth:`~MCPSkillSource.problems`.

Source: the Skills extension specification (github.com/modelcontextprotocol/ext-skills,
``specification/stable/skills.mdx``: "Skill Entries", "Integrity and Verification",
"Limits").
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import logging
import os
import shutil
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import unquote

import anyio
import anyio.abc
import mcp_types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from sagents.core._lifespan import Lifespan, body_errors_apart
from sagents.errors import SagentsError, SkillError
from sagents.mcp import TOOL_NAME_SEPARATOR
from sagents.mcp._ext_types import MAX_SKILL_BYTES, MAX_SKILL_FILES, ListSkillsResult, SkillEntry
from sagents.skill._parser import parse_skill_dir
from sagents.skill._rules import MAX_DESCRIPTION_CHARS
from sagents.skill._schema import SkillProblem, SkillSchema
from sagents.skill.mcp_skills import (
    FETCH_TIMEOUT_S,
    _bytes,
    _check_front_matter,
    _check_layout,
    _Rejected,
    _relative,
    _skill_name,
    _write,
)

__all__ = [
    "LOCK_FILE",
    "MAX_CACHED_BYTES",
    "MAX_CACHED_SKILLS",
    "MAX_FILE_BYTES",
    "MCPSkillSource",
    "SkillRequests",
    "SkillServer",
    "SkillServerStatus",
    "remove_abandoned_caches",
]

logger = logging.getLogger(__name__)

MAX_CACHED_SKILLS = 64
"""Fetched skills kept at once; past it the least recently used copy is dropped."""
MAX_CACHED_BYTES = 256 * 1024 * 1024
"""Bytes of fetched skills kept at once; past it the least recently used copies are dropped."""
MAX_FILE_BYTES = 1024 * 1024
"""Largest file of an upstream skill, as of a local one (what ``skill://`` reads serve)."""

LOCK_FILE = ".lock"
"""The file of a cache directory whose ``flock`` its source holds while entered."""

_MAX_PAGES = 100  # skills/list pages followed at most (a cursor that never ends)
_MISMATCH = "a file does not match its digest and size"


class SkillRequests(Protocol):
    """How the source reaches the servers (the gateway passes its ``MCPSupervisor``'s
    sessions). Both raise :class:`~sagents.errors.SagentsError` (or the SDK's ``MCPError``)
    when the server is down or answers with an error."""

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        """One page of ``skills/list``."""
        ...

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        """``resources/read`` of ``uri`` as the server spells it."""
        ...


@dataclass(frozen=True, kw_only=True)
class SkillServer:
    """A server whose skills join the source.

    Attributes:
        name: The server's name in the config: the skills' namespace.
        list_timeout_s: Seconds the whole ``skills/list`` walk may take.
        fetch_timeout_s: Seconds fetching one skill (every file) may take.
    """

    name: str
    list_timeout_s: float = FETCH_TIMEOUT_S
    fetch_timeout_s: float = FETCH_TIMEOUT_S


@dataclass(frozen=True, kw_only=True)
class SkillServerStatus:
    """Where one server's skills stand.

    Attributes:
        name: The server.
        state: ``pending`` (not listed yet), ``listed``, or ``failed`` (its skills are hidden).
        skills: The namespaced names listed (empty unless ``listed``).
        reason: Why it failed, or why entries were left out; None when all is well.
    """

    name: str
    state: Literal["pending", "listed", "failed"]
    skills: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class _Listed:
    """One accepted catalog entry: the skill as listed, before any file is fetched."""

    server: str
    name: str  # the upstream's name (the SKILL.md's)
    entry: SkillEntry
    relatives: tuple[str, ...]  # each file's path in the skill, in entry order
    placeholder: SkillSchema


@dataclass(frozen=True, kw_only=True)
class _Fetched:
    entry: SkillEntry
    skill: SkillSchema
    size: int


class MCPSkillSource(Lifespan):
    """The skills of MCP servers, listed from ``skills/list`` and fetched lazily.

    It has the reading interface of a :class:`~sagents.skill.SkillManager` (``list_skills``,
    ``get_skill``, ``problems``, ``reload``) and :meth:`fetch_skill`, which a reader awaits
    before it needs a skill's files (:func:`sagents.skill._proxy.prepare_skill`). Enter it
    (``async with``) to own its refresh tasks; leaving removes the cache directory.

    Args:
        servers: The servers, in priority order (the config's order).
        requests: How to reach them.
        cache: A directory this source owns (created on entering, removed on leaving).
        ready: Whether a server is up; the skills of one that is not are hidden. None: always.
        on_changed: Awaited with the server's name after its listing changed what is offered.
        max_cached_skills: Fetched skills kept at once.
        max_cached_bytes: Bytes of fetched skills kept at once.
    """

    def __init__(
        self,
        servers: Sequence[SkillServer],
        requests: SkillRequests,
        cache: Path,
        *,
        ready: Callable[[str], bool] | None = None,
        on_changed: Callable[[str], Awaitable[None]] | None = None,
        max_cached_skills: int = MAX_CACHED_SKILLS,
        max_cached_bytes: int = MAX_CACHED_BYTES,
    ) -> None:
        self._servers = {server.name: server for server in servers}
        self._requests = requests
        self.cache = cache
        self._ready = ready
        self.on_changed = on_changed
        self._max_skills = max_cached_skills
        self._max_bytes = max_cached_bytes
        self._catalog: dict[str, dict[str, _Listed]] = {name: {} for name in self._servers}
        self._status: dict[str, SkillServerStatus] = {
            name: SkillServerStatus(name=name, state="pending") for name in self._servers
        }
        self._rejected: dict[str, list[SkillProblem]] = {name: [] for name in self._servers}
        self._fetch_problems: dict[str, SkillProblem] = {}
        self._fetched: OrderedDict[str, _Fetched] = OrderedDict()
        self._locks: dict[str, anyio.Lock] = {}
        self._listing: dict[str, anyio.Event] = {}  # a refresh is running (set when done)
        self._again: set[str] = set()  # refresh once more when the running one ends
        self._dropping: set[anyio.Event] = set()  # copies a reload dropped, being removed
        self._tg: anyio.abc.TaskGroup | None = None
        self._lock_fd: int | None = None  # held while entered (see remove_abandoned_caches)

    # ---- lifecycle ---------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        """Hold the cache directory's lock and run the listings in one task group; on leaving,
        cancel them, then remove the cache (shielded)."""
        await anyio.to_thread.run_sync(lambda: self.cache.mkdir(parents=True, mode=0o700))
        self._lock_fd = await anyio.to_thread.run_sync(_hold_lock, self.cache)
        try:
            async with body_errors_apart(anyio.create_task_group()) as tg:
                self._tg = tg
                try:
                    yield
                finally:
                    self._tg = None
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    lambda: shutil.rmtree(self.cache, ignore_errors=True)
                )
                if self._lock_fd is not None:
                    os.close(self._lock_fd)
                    self._lock_fd = None

    # ---- listing -----------------------------------------------------------------------------

    def refresh_soon(self, server: str) -> None:
        """Relist ``server``'s skills in the background (once more if a listing is running)."""
        if server not in self._servers or self._tg is None:
            return
        if server in self._listing:
            self._again.add(server)
            return
        self._listing[server] = anyio.Event()
        self._tg.start_soon(self._refresh_loop, server)

    async def _refresh_loop(self, server: str) -> None:
        try:
            while True:
                self._again.discard(server)
                await self.refresh(server)
                if server not in self._again:
                    break
        finally:
            self._listing.pop(server).set()

    async def refresh(self, server: str) -> bool:
        """List ``server``'s skills now; whether what it offers changed. Never raises for
        the server's faults: a failed listing hides its skills and records why."""
        limits = self._servers[server]
        before = (self._status[server], {n: s.entry for n, s in self._catalog[server].items()})
        try:
            entries, cut = await self._list(limits)
        except _ListingFailed as error:
            logger.warning("skills of MCP server %r are hidden: %s", server, error)
            self._catalog[server] = {}
            self._rejected[server] = []
            self._status[server] = SkillServerStatus(name=server, state="failed", reason=str(error))
        else:
            self._accept(server, entries, cut=cut)
        after = (self._status[server], {n: s.entry for n, s in self._catalog[server].items()})
        changed = before != after
        if changed and self.on_changed is not None:
            try:
                await self.on_changed(server)
            except Exception as error:  # noqa: BLE001 - a listener's failure is not the server's
                logger.warning("skills of MCP server %r: change listener failed: %s", server, error)
        return changed

    async def _list(self, server: SkillServer) -> tuple[list[SkillEntry], bool]:
        """The entries of every page, and whether the walk stopped at :data:`_MAX_PAGES`
        with a cursor still to follow."""
        entries: list[SkillEntry] = []
        with anyio.move_on_after(server.list_timeout_s):
            cursor: str | None = None
            seen: set[str] = set()
            for _ in range(_MAX_PAGES):
                try:
                    page = await self._requests.list_skills(server.name, cursor)
                except (SagentsError, MCPError, ValidationError) as error:
                    raise _ListingFailed(f"skills/list failed: {_message(error)}") from None
                entries.extend(page.skills)
                if not page.next_cursor or page.next_cursor in seen:
                    return entries, False
                seen.add(page.next_cursor)
                cursor = page.next_cursor
            logger.warning(
                "skills of MCP server %r: skills/list was cut after %d pages",
                server.name,
                _MAX_PAGES,
            )
            return entries, True
        raise _ListingFailed(f"skills/list got no answer within {server.list_timeout_s} s")

    def _accept(self, server: str, entries: list[SkillEntry], *, cut: bool = False) -> None:
        accepted: dict[str, _Listed] = {}
        rejected: list[SkillProblem] = []
        for entry in entries:
            try:
                listed = self._check(server, entry)
                if listed.name in accepted:
                    raise _Rejected(f"a second skill is named {listed.name!r} (the first is kept)")
            except _Rejected as error:
                logger.warning("skill %s of MCP server %r left out: %s", entry.uri, server, error)
                rejected.append(
                    SkillProblem(
                        file=self.cache / server,
                        field=None,
                        reason=f"{entry.uri!r} of MCP server {server!r} is left out: {error}",
                        severity="error",
                        skill=str(entry.frontmatter.get("name", entry.uri)),
                    )
                )
                continue
            accepted[listed.name] = listed
        self._catalog[server] = accepted
        self._rejected[server] = rejected
        reasons = [f"{len(rejected)} skill(s) left out (see problems)"] if rejected else []
        if cut:
            reasons.append(
                f"skills/list was cut after {_MAX_PAGES} pages (a cursor that never ends)"
            )
        reason = "; ".join(reasons) or None
        names = tuple(_namespaced(server, name) for name in accepted)
        self._status[server] = SkillServerStatus(
            name=server, state="listed", skills=names, reason=reason
        )

    def _check(self, server: str, entry: SkillEntry) -> _Listed:
        """The entry as a listed skill, if it passes every check that needs no file."""
        name = _skill_name(entry.frontmatter.get("name", ""))
        description = entry.frontmatter.get("description")
        if not isinstance(description, str) or not description.strip():
            raise _Rejected("its front matter has no description (the skill would not load)")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise _Rejected(f"its description is longer than {MAX_DESCRIPTION_CHARS} characters")
        if not entry.uri.endswith("/SKILL.md"):
            raise _Rejected("its uri does not name a SKILL.md")
        base = entry.uri.removesuffix("SKILL.md")
        if _last_segment(base) != name:
            raise _Rejected(f"the last segment of its uri is not its name {name!r}")
        if isinstance(entry.resources, str):
            raise _Rejected("its files are 'dynamic' (no digests to verify them by)")
        if len(entry.resources) > MAX_SKILL_FILES:
            raise _Rejected(f"it has more than {MAX_SKILL_FILES} files")
        if sum(f.size for f in entry.resources) > MAX_SKILL_BYTES:
            raise _Rejected(f"it is larger than {MAX_SKILL_BYTES} bytes")
        for listed in entry.resources:
            if listed.size > MAX_FILE_BYTES:
                raise _Rejected(f"{listed.uri!r} is larger than {MAX_FILE_BYTES} bytes")
        relatives = tuple(_relative(base, listed.uri) for listed in entry.resources)
        _check_layout(list(relatives))
        if "SKILL.md" not in relatives:
            raise _Rejected("its files do not include its SKILL.md")
        placeholder = SkillSchema(
            name=_namespaced(server, name),
            description=description,
            body="",  # the instructions arrive with the files (fetch_skill)
            path=self.cache / server / name,
            files=tuple(sorted(relatives)),
            license=_text(entry.frontmatter.get("license")),
            compatibility=_text(entry.frontmatter.get("compatibility")),
        )
        return _Listed(
            server=server, name=name, entry=entry, relatives=relatives, placeholder=placeholder
        )

    async def first_listings(self, timeout: float) -> None:  # noqa: ASYNC109 - a bound
        """Wait at most ``timeout`` seconds for the running first listings of servers (those
        never listed yet), so that a client listing right after start finds their skills."""
        with anyio.move_on_after(timeout):
            for server, event in list(self._listing.items()):
                if self._status[server].state == "pending":
                    await event.wait()

    async def settled(self) -> None:
        """Wait until no listing is running (each is bounded by its server's
        ``list_timeout_s``) and the copies a :meth:`reload` dropped are removed."""
        while self._listing or self._dropping:
            await next(iter([*self._listing.values(), *self._dropping])).wait()

    async def _first_listing(self, server: str) -> None:
        """Wait (bounded) for a listing of ``server`` that is running and is its first."""
        event = self._listing.get(server)
        if event is not None and self._status[server].state == "pending":
            with anyio.move_on_after(self._servers[server].list_timeout_s):
                await event.wait()

    # ---- the reading interface ---------------------------------------------------------------

    def _shown(self, server: str) -> bool:
        return self._ready is None or self._ready(server)

    def _find(self, name: str) -> _Listed | None:
        server, separator, skill = name.partition(TOOL_NAME_SEPARATOR)
        if not separator or server not in self._catalog or not self._shown(server):
            return None
        return self._catalog[server].get(skill)

    def _schema(self, listed: _Listed) -> SkillSchema:
        fetched = self._fetched.get(listed.placeholder.name)
        if fetched is not None and fetched.entry == listed.entry:
            return fetched.skill
        return listed.placeholder

    def list_skills(self) -> list[SkillSchema]:
        """Every listed skill of every ready server, in server order then listing order."""
        return [
            self._schema(listed)
            for server, catalog in self._catalog.items()
            if self._shown(server)
            for listed in catalog.values()
        ]

    def list_skill_names(self) -> list[str]:
        """The names of :meth:`list_skills`, in the same order."""
        return [skill.name for skill in self.list_skills()]

    def get_skill(self, name: str) -> SkillSchema | None:
        """The skill ``<server>__<skill>``: parsed once fetched, else as listed (its body
        empty until :meth:`fetch_skill`)."""
        listed = self._find(name)
        return self._schema(listed) if listed is not None else None

    def is_current(self, name: str) -> bool:
        """Whether ``name`` is fetched and its copy matches the server's current entry."""
        listed = self._find(name)
        fetched = self._fetched.get(name)
        return listed is not None and fetched is not None and fetched.entry == listed.entry

    def entry(self, name: str) -> tuple[SkillEntry, tuple[str, ...]] | None:
        """The server's entry of ``name`` and each file's path in the skill (entry order)."""
        listed = self._find(name)
        return (listed.entry, listed.relatives) if listed is not None else None

    def problems(self) -> list[SkillProblem]:
        """Servers whose skills are hidden, entries left out, fetches that failed."""
        problems: list[SkillProblem] = []
        for server, status in self._status.items():
            if status.state == "failed":
                problems.append(
                    SkillProblem(
                        file=self.cache / server,
                        field=None,
                        reason=f"skills of MCP server {server!r} are hidden: {status.reason}",
                        severity="warning",
                    )
                )
            problems.extend(self._rejected[server])
        problems.extend(self._fetch_problems.values())
        return problems

    def statuses(self) -> list[SkillServerStatus]:
        """Each server's listing state, in server order (``failed`` while it is not ready)."""
        return [
            status
            if self._shown(name)
            else SkillServerStatus(name=name, state="failed", reason="the MCP server is not ready")
            for name, status in self._status.items()
        ]

    def reload(self) -> None:
        """Drop every fetched copy (each is fetched again on its next use; the files are
        removed in the background) and relist."""
        dropped = [(name, fetched.skill.path) for name, fetched in self._fetched.items()]
        self._fetched.clear()
        if dropped and self._tg is not None:  # their files too, as an eviction removes them
            done = anyio.Event()
            self._dropping.add(done)
            self._tg.start_soon(self._drop_soon, dropped, done)
        for server in self._servers:
            self.refresh_soon(server)

    async def _drop_soon(self, dropped: list[tuple[str, Path]], done: anyio.Event) -> None:
        try:
            await self._drop(dropped)
        finally:
            self._dropping.discard(done)
            done.set()

    # ---- fetching ----------------------------------------------------------------------------

    async def fetch_skill(self, name: str) -> None:
        """Make sure ``name``'s files are here and current (fetched, verified, parsed).

        A name that is not one of this source's listed skills is left alone (the reader then
        reports it as not found).

        Raises:
            SkillError: the server did not answer within the server's ``fetch_timeout_s``, a
                file failed its digest or size (also after relisting once), a path or the
                front matter broke a rule, or the fetched skill does not parse. Nothing of a
                failed fetch is kept.
        """
        server = name.partition(TOOL_NAME_SEPARATOR)[0]
        if server in self._servers:
            await self._first_listing(server)
        listed = self._find(name)
        if listed is None:
            return
        async with self._locks.setdefault(name, anyio.Lock()):
            if self.is_current(name):
                self._fetched.move_to_end(name)
                return
            try:
                files = await self._download(listed)
            except _Stale:
                await self.refresh(listed.server)
                fresh = self._find(name)
                if fresh is None or fresh.entry == listed.entry:
                    raise self._failed(listed, _MISMATCH) from None
                listed = fresh
                try:
                    files = await self._download(listed)
                except _Stale:
                    raise self._failed(listed, _MISMATCH) from None
            skill = await anyio.to_thread.run_sync(self._store, listed, files)
            self._fetch_problems.pop(name, None)
            self._fetched[name] = _Fetched(
                entry=listed.entry, skill=skill, size=sum(len(d) for d in files.values())
            )
        await self._evict(keep=name)  # outside this lock: eviction takes the evicted ones'

    async def _download(self, listed: _Listed) -> dict[str, bytes]:
        assert not isinstance(listed.entry.resources, str)
        limit = self._servers[listed.server].fetch_timeout_s
        files: dict[str, bytes] = {}
        with anyio.move_on_after(limit):
            for remote, relative in zip(listed.entry.resources, listed.relatives, strict=True):
                try:
                    read = await self._requests.read_resource(listed.server, remote.uri)
                except (SagentsError, MCPError, ValidationError) as error:
                    raise self._failed(
                        listed, f"{remote.uri!r} cannot be read: {_message(error)}"
                    ) from None
                try:
                    data = _bytes(read, remote.uri)
                except _Rejected as error:
                    raise self._failed(listed, str(error)) from None
                if len(data) != remote.size or not _matches(data, remote.digest):
                    raise _Stale
                files[relative] = data
            try:
                _check_front_matter(files["SKILL.md"], listed.entry.frontmatter)
            except _Rejected as error:
                raise self._failed(listed, str(error)) from None
            return files
        raise self._failed(listed, f"its files were not all read within {limit} s")

    def _store(self, listed: _Listed, files: dict[str, bytes]) -> SkillSchema:
        """Write the verified files fresh and parse them (in a worker thread)."""
        folder = self.cache / listed.server
        folder.mkdir(exist_ok=True, mode=0o700)
        staging = folder / f".{listed.name}.partial"
        final = folder / listed.name
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _write(staging, files)
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        except OSError as error:  # a name too long for the disk, the disk full ...
            raise self._failed(listed, f"its files cannot be written here: {error}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        load = parse_skill_dir(final)
        for problem in load.problems:
            logger.warning("skill %s of MCP server %r: %s", listed.name, listed.server, problem)
        if load.skill is None:
            shutil.rmtree(final, ignore_errors=True)
            reasons = "; ".join(p.reason for p in load.problems if p.severity == "error")
            raise self._failed(listed, f"it does not load: {reasons or 'see the log'}")
        return dataclasses.replace(load.skill, name=listed.placeholder.name)

    def _failed(self, listed: _Listed, reason: str) -> SkillError:
        name = listed.placeholder.name
        message = f"skill {name!r} of MCP server {listed.server!r} cannot be fetched: {reason}"
        logger.warning("%s", message)
        self._fetch_problems[name] = SkillProblem(
            file=self.cache / listed.server / listed.name,
            field=None,
            reason=message,
            severity="error",
            skill=name,
        )
        return SkillError(
            message,
            hint="the server's other skills are unaffected; ask its operator to fix this one",
            details={"skill": name, "server": listed.server},
        )

    async def _evict(self, *, keep: str) -> None:
        """Drop the least recently used copies past the bounds (never ``keep``)."""
        dropped: list[tuple[str, Path]] = []
        while len(self._fetched) > 1 and (
            len(self._fetched) > self._max_skills
            or sum(f.size for f in self._fetched.values()) > self._max_bytes
        ):
            oldest = next(iter(self._fetched))
            if oldest == keep:
                self._fetched.move_to_end(oldest)
                continue
            dropped.append((oldest, self._fetched.pop(oldest).skill.path))
        await self._drop(dropped)

    async def _drop(self, dropped: list[tuple[str, Path]]) -> None:
        for name, path in dropped:
            # under the skill's lock, and only if no fetch of it stored a new copy meanwhile
            async with self._locks.setdefault(name, anyio.Lock()):
                if name not in self._fetched:
                    await anyio.to_thread.run_sync(_remove, path)


class _ListingFailed(Exception):
    """A server's listing failed or timed out; its skills are hidden."""


class _Stale(Exception):
    """A fetched file does not match the entry: the server may have changed it."""


def remove_abandoned_caches(parent: Path) -> list[Path]:
    """Remove the cache directories under ``parent`` that no entered source holds (those of
    a process that was killed before it could remove its own); the ones removed.

    Each entered :class:`MCPSkillSource` holds an exclusive ``flock`` on its cache's
    :data:`LOCK_FILE` (an advisory lock the kernel drops when the process dies, whatever its
    pid namespace), so a directory whose lock can be taken is abandoned. A directory without
    that file (one being created) is left alone.
    """
    try:
        children = sorted(parent.iterdir())
    except FileNotFoundError:
        return []
    removed: list[Path] = []
    for child in children:
        try:
            fd = os.open(child / LOCK_FILE, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue  # not a cache directory, or one still being created
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held: its gateway is running
            continue
        try:
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
        finally:
            os.close(fd)
    return removed


def _hold_lock(cache: Path) -> int:
    # locked before it gets its name, so that no sweep ever finds it unlocked
    staging = cache / f"{LOCK_FILE}.{os.getpid()}"
    fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    staging.rename(cache / LOCK_FILE)
    return fd


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _namespaced(server: str, name: str) -> str:
    return f"{server}{TOOL_NAME_SEPARATOR}{name}"


def _last_segment(base: str) -> str:
    return unquote(base.rstrip("/").rsplit("/", 1)[-1])


def _matches(data: bytes, digest: str) -> bool:
    return "sha256:" + hashlib.sha256(data).hexdigest() == digest


def _message(error: SagentsError | MCPError | ValidationError) -> str:
    return error.message if isinstance(error, SagentsError) else str(error)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
