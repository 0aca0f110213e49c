"""Skills of an MCP server (the Skills extension) as a skill root (docs/skills.md).

:func:`fetch_mcp_skills` reads a server's ``skills/list``, fetches each skill's files with
``resources/read``, verifies every file against the entry's ``digest`` and ``size`` and the
``SKILL.md`` front matter against the entry's ``frontmatter``, and writes the skills under
``<cache>/<server>/<skill name>/``: a root for :meth:`SkillManager.add_skill_dir`, so an MCP
server's skills are parsed and validated by the same parser as local ones, and kept apart
per server (the directory is the server's namespace; a name that two roots share is reported
by the manager as shadowed, never silently). A skill that fails a check is left out with a
warning; ``"dynamic"`` skills (no digests) are left out too.

Source: the Skills extension specification (github.com/modelcontextprotocol/ext-skills,
``specification/stable/skills.mdx``: "Skill Entries", "Integrity and Verification").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import anyio
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from sagents.errors import SkillError
from sagents.mcp._ext_types import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    ListSkillsRequest,
    ListSkillsResult,
    SkillEntry,
)
from sagents.skill._frontmatter import (
    FrontMatterError,
    decode_text,
    load_yaml_mapping,
    split_front_matter,
)
from sagents.skill._rules import check_name

__all__ = ["FETCH_TIMEOUT_S", "fetch_mcp_skills"]

FETCH_TIMEOUT_S = 30.0
"""Seconds the listing (every ``skills/list`` page) or one ``resources/read`` may take."""

logger = logging.getLogger(__name__)

_MAX_PAGES = 100  # skills/list pages followed at most (a cursor that never ends)
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_JSON = TypeAdapter(Any)
_T = TypeVar("_T")


class _Rejected(Exception):
    """One skill failed a check; it is left out."""


async def fetch_mcp_skills(
    session: ClientSession, server: str, cache: Path, *, request_timeout_s: float = FETCH_TIMEOUT_S
) -> Path:
    """Fetch the skills ``server`` offers into ``cache/server`` (replaced); that directory.

    A skill is left out (with a warning) when its name is not a skill name (the Agent Skills
    rules, as the parser applies them), a file's URI leaves the skill once percent-decoded
    (``..``, hidden files, an encoded ``/`` or ``\\``), two of its files cannot both exist (a
    file that is also a folder, a file listed twice), or a file does not match its digest.

    Args:
        session: An initialised session with the server (either protocol era).
        server: The server's name in the config: the skills' namespace directory.
        cache: Where fetched skills are kept (a directory of the gateway's data dir).
        request_timeout_s: Seconds each request to the server may take.

    Returns:
        The skill root to pass to :meth:`~sagents.skill.SkillManager.add_skill_dir`.

    Raises:
        SkillError: ``server`` is not a plain name, the server does not answer
            ``skills/list`` (it does not offer the Skills extension), or a request got no
            answer within ``request_timeout_s`` (nothing of this fetch is kept).
    """
    if not _SERVER_NAME.fullmatch(server) or server in (".", ".."):
        raise SkillError(
            f"{server!r} cannot name a skill namespace: use letters, digits, '_', '-', '.'",
            details={"server": server},
        )
    entries = await _bounded(_list(session, server), server, "skills/list", request_timeout_s)
    root = cache / server
    staging = cache / f".{server}.partial"
    await anyio.to_thread.run_sync(lambda: _fresh(staging))
    try:
        names: set[str] = set()
        for entry in entries:
            name = entry.frontmatter.get("name", "")
            try:
                name = _skill_name(name)
                if name in names:
                    raise _Rejected(f"a second skill is named {name!r} (the first one is kept)")
                files = await _fetch(session, entry, name, server=server, limit_s=request_timeout_s)
                await anyio.to_thread.run_sync(_write, staging / name, files)
                names.add(name)
            except _Rejected as error:
                logger.warning("skill %s of MCP server %r left out: %s", entry.uri, server, error)
        await anyio.to_thread.run_sync(lambda: _swap(staging, root))
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
    return root


async def _bounded(awaitable: Awaitable[_T], server: str, what: str, limit_s: float) -> _T:
    with anyio.move_on_after(limit_s):
        return await awaitable
    raise SkillError(
        f"MCP server {server!r} did not answer {what} within {limit_s} s",
        hint="check that the server is up, or fetch with a longer timeout",
        details={"server": server, "request": what, "timeout": limit_s},
    )


def _skill_name(name: object) -> str:
    """The entry's name, if it can name a skill directory (the parser's name rules)."""
    if not isinstance(name, str) or not name:
        raise _Rejected(f"its front matter names it {name!r}, not a skill name")
    problems = check_name(name, directory=name, file=Path("SKILL.md"), seed_form=False)
    errors = [p.reason for p in problems if p.severity == "error"]
    if errors:
        raise _Rejected(f"{name!r} is not a skill name: {'; '.join(errors)}")
    return name


async def _list(session: ClientSession, server: str) -> list[SkillEntry]:
    entries: list[SkillEntry] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            page = await session.send_request(ListSkillsRequest(params=params), ListSkillsResult)
        except MCPError as error:
            raise SkillError(
                f"MCP server {server!r} does not list skills (skills/list: {error})",
                hint="the server must offer the MCP Skills extension",
                details={"server": server},
            ) from error
        entries.extend(page.skills)
        if not page.next_cursor or page.next_cursor == cursor:
            break
        cursor = page.next_cursor
    return entries


async def _fetch(
    session: ClientSession, entry: SkillEntry, name: str, *, server: str, limit_s: float
) -> dict[str, bytes]:
    """The verified files of one skill, by relative path."""
    if not entry.uri.endswith("/SKILL.md"):
        raise _Rejected("its uri does not name a SKILL.md")
    base = entry.uri.removesuffix("SKILL.md")
    if unquote(base.rstrip("/").rsplit("/", 1)[-1]) != name:
        raise _Rejected(f"the last segment of its uri is not its name {name!r}")
    if isinstance(entry.resources, str):
        raise _Rejected("its files are 'dynamic' (no digests to verify them by)")
    if len(entry.resources) > MAX_SKILL_FILES:
        raise _Rejected(f"it has more than {MAX_SKILL_FILES} files")
    if sum(f.size for f in entry.resources) > MAX_SKILL_BYTES:
        raise _Rejected(f"it is larger than {MAX_SKILL_BYTES} bytes")
    relatives = [_relative(base, listed.uri) for listed in entry.resources]
    _check_layout(relatives)
    files: dict[str, bytes] = {}
    for listed, relative in zip(entry.resources, relatives, strict=True):
        try:
            read = await _bounded(
                session.read_resource(listed.uri), server, f"resources/read {listed.uri!r}", limit_s
            )
        except MCPError as error:
            raise _Rejected(f"{listed.uri!r} cannot be read: {error}") from None
        data = _bytes(read, listed.uri)
        if len(data) != listed.size or (
            "sha256:" + hashlib.sha256(data).hexdigest() != listed.digest
        ):
            raise _Rejected(f"{listed.uri!r} does not match its digest and size")
        files[relative] = data
    if "SKILL.md" not in files:
        raise _Rejected("its files do not include its SKILL.md")
    _check_front_matter(files["SKILL.md"], entry.frontmatter)
    return files


def _relative(base: str, uri: str) -> str:
    """The file's path in the skill: each URI segment percent-decoded (as servers quote them,
    docs/gateway.md), and every decoded segment a plain, visible file or folder name."""
    if not uri.startswith(base):
        raise _Rejected(f"{uri!r} is not inside the skill")
    parts = [unquote(part) for part in uri.removeprefix(base).split("/")]
    for part in parts:
        if part in ("", ".", "..") or any(c in part for c in "/\\\x00"):
            raise _Rejected(f"{uri!r} is not a plain path inside the skill")
        if part.startswith("."):
            raise _Rejected(f"{uri!r} is a hidden file (skills never ship them)")
    return "/".join(parts)


def _check_layout(relatives: list[str]) -> None:
    """Every file can be written: none listed twice, none also a folder of another."""
    seen: set[str] = set()
    for relative in relatives:
        if relative in seen:
            raise _Rejected(f"it lists {relative!r} twice")
        seen.add(relative)
    for relative in relatives:
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in seen:
                raise _Rejected(f"{folder!r} is both a file and a folder of {relative!r}")


def _bytes(read: mt.ReadResourceResult, uri: str) -> bytes:
    for content in read.contents:
        if str(content.uri) != uri:
            continue
        if isinstance(content, mt.BlobResourceContents):
            try:
                return base64.b64decode(content.blob)
            except binascii.Error as error:
                raise _Rejected(
                    f"resources/read of {uri!r} sent a blob that is not base64: {error}"
                ) from None
        return content.text.encode("utf-8")
    raise _Rejected(f"resources/read of {uri!r} returned no contents for it")


def _check_front_matter(skill_md: bytes, expected: dict[str, Any]) -> None:
    try:
        split = split_front_matter(decode_text(skill_md))
        front = load_yaml_mapping(split.front_matter or "")
    except FrontMatterError as error:
        raise _Rejected(f"its SKILL.md cannot be parsed: {error}") from None
    if _JSON.dump_python(front, mode="json") != expected:
        raise _Rejected("its SKILL.md front matter differs from its entry")


def _fresh(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, mode=0o700)


def _write(directory: Path, files: dict[str, bytes]) -> None:
    directory.mkdir(mode=0o700)
    for relative, data in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # O_EXCL | O_NOFOLLOW: a fresh regular file, never through a link
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def _swap(staging: Path, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
