"""A stdio MCP server offering the Tasks and Skills extensions, built on the gateway's own
extension code (``sagents.gateway.Gateway``), so that the upstream side of both is tested.

Usage: ``python ext_server.py SKILLS_DIR``. Tools: ``slow`` (waits until ``release`` is
called; past 0.5 s it becomes a task for a client that declared Tasks), ``release``,
``seen`` (whether ``slow`` started, and how many requests of each method the server served),
``announce`` (sends ``notifications/resources/list_changed``: its skills changed), ``ask``
(asks its client a question through the task, ``input_required`` with one form elicitation,
and returns ``answer: <action> <content>``; a write tool, so never retried), and
``ask_twice`` (two questions in turn).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.gateway import Gateway
from sagents.gateway._approval import current_client_asker
from sagents.gateway._sources import SkillResources
from sagents.skill import SkillManager
from sagents.tool import ToolRequest
from sagents.tool._spec_provider import SpecProvider
from tests.gateway.fakes import _spec

BACKGROUND_AFTER_S = 0.5


class Provider(SpecProvider):
    def __init__(self) -> None:
        self.started = False
        self.release = anyio.Event()
        self.methods: Counter[str] = Counter()
        self.announce: Callable[[], Awaitable[object]] | None = None

    def list_specs(self) -> list[ToolSpec]:
        names = ("slow", "release", "seen", "announce")
        return [
            *(_spec(name, "read_only", server=None) for name in names),
            _spec("ask", "write", server=None),
            _spec("ask_twice", "write", server=None),
        ]

    async def call(self, request: ToolRequest) -> ToolResult:
        name = request.name
        if name == "slow":
            self.started = True
            await self.release.wait()
            return ToolResult.from_text("slow done")
        if name in ("ask", "ask_twice"):
            asker = current_client_asker()
            assert asker is not None
            schema: mt.ElicitRequestedSchema = {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
                "required": ["colour"],
            }
            answers = []
            for question in ("Which colour?", "And again?")[: 1 if name == "ask" else 2]:
                got = await asker.choose(question, schema)
                answers.append(f"{got.action} {(got.content or {}).get('colour', '')}".strip())
            return ToolResult.from_text("answer: " + "; ".join(answers))
        if name == "release":
            self.release.set()
            return ToolResult.from_text("released")
        if name == "announce":
            assert self.announce is not None
            await self.announce()
            return ToolResult.from_text("announced")
        return ToolResult.from_structured({"started": self.started, "methods": self.methods})


async def main() -> None:
    provider = Provider()
    skills = SkillManager()
    skills.add_skill_dir(sys.argv[1])

    async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        provider.methods[ctx.method] += 1
        return await call_next(ctx)

    async with Gateway(
        provider,
        mode="auto",
        resources=SkillResources(skills),
        background_after_s=BACKGROUND_AFTER_S,
    ) as gateway:
        gateway.server.middleware.append(count)
        provider.announce = lambda: gateway.notify_list_changed("resources")
        await gateway.run_stdio()


anyio.run(main)
