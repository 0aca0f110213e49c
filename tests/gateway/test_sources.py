"""The gateway's seams on the real layers: the hub as a ProgressSource, skills as resources."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sagents.core.events import ToolProgressEvent
from sagents.errors import PathNotAllowedError, SkillNotFoundError, SkillResourceNotFoundError
from sagents.gateway._sources import HubProgressSource, SkillResources, skill_uri
from sagents.progress._hub import ProgressHub
from sagents.skill._manager import SkillManager

SKILLS = Path(__file__).parent / "fixtures" / "skills"


def event(call: str, text: str) -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id=call, text=text, stream="info", ts=0.0)


@pytest.mark.anyio
async def test_a_subscription_receives_only_its_own_calls_events_then_ends() -> None:
    hub = ProgressHub()
    source = HubProgressSource(hub)
    with anyio.fail_after(5):
        async with source.subscribe("s1", "c1") as events:
            hub.publish("s1", event("c1", "mine"))
            hub.publish("s1", event("c2", "another call"))
            hub.publish("s2", event("c1", "another session"))
            first = events.receive_nowait()
            with pytest.raises(anyio.WouldBlock):
                events.receive_nowait()
            clone = events.clone()
        received = [item async for item in clone]
    assert isinstance(first, ToolProgressEvent)
    assert first.text == "mine"
    assert received == []
    assert hub.queues("s1") == ()


def test_skill_files_are_listed_per_profile_with_skill_md_first() -> None:
    manager = SkillManager()
    manager.add_skill_dir(SKILLS)
    resources = SkillResources(manager)
    everything = [link.uri for link in resources.list_resources(None)]
    triage = [link.uri for link in resources.list_resources(frozenset({"triage"}))]
    assert everything[0] == "skill://other/SKILL.md"
    assert triage == ["skill://triage/SKILL.md", "skill://triage/references/checklist.md"]
    assert skill_uri("a b", "x y/z.md") == "skill://a%20b/x%20y/z.md"


@pytest.mark.anyio
async def test_reading_a_skill_file_refuses_what_the_session_may_not_read() -> None:
    manager = SkillManager()
    manager.add_skill_dir(SKILLS)
    resources = SkillResources(manager)
    only_triage = frozenset({"triage"})
    read = await resources.read_resource("skill://triage/SKILL.md", only_triage)
    assert read.text is not None
    assert "# Triage" in read.text
    with pytest.raises(SkillNotFoundError):
        await resources.read_resource("skill://other/SKILL.md", only_triage)
    with pytest.raises(SkillNotFoundError):
        await resources.read_resource("file:///etc/passwd", None)
    with pytest.raises(SkillResourceNotFoundError):
        await resources.read_resource("skill://triage/", None)
    with pytest.raises(SkillResourceNotFoundError):
        await resources.read_resource("skill://triage/missing.md", None)
    with pytest.raises(PathNotAllowedError):
        await resources.read_resource("skill://triage/%2E%2E/other/SKILL.md", None)
