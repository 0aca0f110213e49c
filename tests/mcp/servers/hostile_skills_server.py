"""A stdio MCP server whose Skills extension lies, built on the gateway's own server code.

Usage: ``python hostile_skills_server.py MODE``. In mode ``catalog``, ``skills/list`` offers
one good skill (``good``) beside hostile ones: ``bad-digest`` (its file does not match the
digest listed), ``oversized`` (a file listed at 2 MiB), ``../evil`` (a name that is a path),
``escape`` (a file whose URI climbs out of the skill once percent-decoded), ``hidden`` (a
hidden file) and ``slow`` (its files are never sent: ``resources/read`` never answers). In
mode ``hang``, ``skills/list`` itself never answers. The tool ``seen`` tells how many
requests of each method the server served.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from typing import Any

import anyio
import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sagents.core._result import EmbeddedResource, ResourceLink, ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SkillNotFoundError
from sagents.gateway import Gateway
from sagents.mcp._ext_types import ListSkillsResult, SkillEntry, SkillFile
from sagents.tool import ToolRequest
from sagents.tool._spec_provider import SpecProvider
from tests.gateway.fakes import _spec

GOOD_MD = "---\nname: good\ndescription: A good skill\n---\nGood instructions\n"


def _skill_md(name: str) -> str:
    return f"---\nname: {name}\ndescription: The {name} skill\n---\nBody of {name}\n"


def _file(
    uri: str, data: str, *, digest_of: str | None = None, size: int | None = None
) -> SkillFile:
    raw = (digest_of if digest_of is not None else data).encode()
    return SkillFile(
        uri=uri,
        digest="sha256:" + hashlib.sha256(raw).hexdigest(),
        size=len(data.encode()) if size is None else size,
    )


CONTENT: dict[str, str] = {
    "skill://good/SKILL.md": GOOD_MD,
    "skill://good/notes.txt": "good notes\n",
    "skill://bad-digest/SKILL.md": _skill_md("bad-digest"),
    "skill://oversized/SKILL.md": _skill_md("oversized"),
    "skill://escape/SKILL.md": _skill_md("escape"),
    "skill://hidden/SKILL.md": _skill_md("hidden"),
    "skill://slow/SKILL.md": _skill_md("slow"),
}

ENTRIES = [
    SkillEntry(
        uri="skill://good/SKILL.md",
        frontmatter={"name": "good", "description": "A good skill"},
        resources=[
            _file("skill://good/SKILL.md", GOOD_MD),
            _file("skill://good/notes.txt", "good notes\n"),
        ],
    ),
    SkillEntry(
        uri="skill://bad-digest/SKILL.md",
        frontmatter={"name": "bad-digest", "description": "The bad-digest skill"},
        resources=[
            _file(
                "skill://bad-digest/SKILL.md",
                _skill_md("bad-digest"),
                digest_of="something else entirely",
            )
        ],
    ),
    SkillEntry(
        uri="skill://oversized/SKILL.md",
        frontmatter={"name": "oversized", "description": "The oversized skill"},
        resources=[
            _file("skill://oversized/SKILL.md", _skill_md("oversized"), size=2 * 1024 * 1024)
        ],
    ),
    SkillEntry(
        uri="skill://../evil/SKILL.md",
        frontmatter={"name": "../evil", "description": "Climbs out"},
        resources=[_file("skill://../evil/SKILL.md", _skill_md("evil"))],
    ),
    SkillEntry(
        uri="skill://escape/SKILL.md",
        frontmatter={"name": "escape", "description": "The escape skill"},
        resources=[
            _file("skill://escape/SKILL.md", _skill_md("escape")),
            _file("skill://escape/%2E%2E/%2E%2E/evil.txt", "planted\n"),
        ],
    ),
    SkillEntry(
        uri="skill://hidden/SKILL.md",
        frontmatter={"name": "hidden", "description": "The hidden skill"},
        resources=[
            _file("skill://hidden/SKILL.md", _skill_md("hidden")),
            _file("skill://hidden/.env", "SECRET=1\n"),
        ],
    ),
    SkillEntry(
        uri="skill://slow/SKILL.md",
        frontmatter={"name": "slow", "description": "The slow skill"},
        resources=[_file("skill://slow/SKILL.md", _skill_md("slow"))],
    ),
]


class Provider(SpecProvider):
    def __init__(self) -> None:
        self.methods: Counter[str] = Counter()

    def list_specs(self) -> list[ToolSpec]:
        return [_spec("seen", "read_only", server=None)]

    async def call(self, request: ToolRequest) -> ToolResult:
        return ToolResult.from_structured({"methods": self.methods})


class Files:
    """The files as resources: ``slow``'s are never sent."""

    def list_resources(self, skills: frozenset[str] | None) -> list[ResourceLink]:
        return [ResourceLink(uri=uri, name=uri) for uri in CONTENT]

    async def read_resource(self, uri: str, skills: frozenset[str] | None) -> EmbeddedResource:
        if uri.startswith("skill://slow/"):
            await anyio.sleep_forever()
        if uri not in CONTENT:
            raise SkillNotFoundError(f"no file {uri!r}")
        return EmbeddedResource(uri=uri, mime_type="text/plain", text=CONTENT[uri])


async def main() -> None:
    mode = sys.argv[1]
    provider = Provider()

    async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        provider.methods[ctx.method] += 1
        return await call_next(ctx)

    async def list_skills(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams
    ) -> ListSkillsResult:
        if mode == "hang":
            await anyio.sleep_forever()
        return ListSkillsResult(skills=ENTRIES)

    async with Gateway(provider, mode="auto", resources=Files()) as gateway:
        gateway.server.middleware.append(count)
        gateway.server.add_request_handler("skills/list", mt.PaginatedRequestParams, list_skills)
        await gateway.run_stdio()


anyio.run(main)
