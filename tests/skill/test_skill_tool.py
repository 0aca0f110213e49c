"""The skill tools through the real ToolManager, ToolProxy and MemorySandbox."""

from pathlib import Path

import pytest

from sagents.sandbox import SandboxParams, create_sandbox
from sagents.skill import SandboxSkillManager, SkillManager, SkillProxy, SkillSession, SkillTools
from sagents.tool import SessionContext, ToolManager, ToolProxy


def _write_skill(root: Path, name: str, allowed: str | None, body: str = "Do the thing.") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    allowed_line = f"allowed-tools: {allowed}\n" if allowed else ""
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Use for {name} tasks.\n{allowed_line}---\n{body}\n",
        encoding="utf-8",
    )
    (folder / "references").mkdir()
    (folder / "references" / "guide.md").write_text("guide text", encoding="utf-8")


def _manager() -> ToolManager:
    manager = ToolManager()

    def search(q: str) -> str:
        return f"found {q}"

    def delete(path: str) -> str:
        return f"deleted {path}"

    manager.register_tool(search)
    manager.register_tool(delete)
    return manager


@pytest.mark.anyio
async def test_loading_a_skill_holds_the_session_to_its_allowed_tools(tmp_path: Path) -> None:
    _write_skill(tmp_path, "research", "search")
    skills = SkillManager()
    skills.add_skill_dir(tmp_path)
    manager = _manager()
    proxy = ToolProxy([manager])
    tools = SkillTools(lambda ctx: SkillSession(SkillProxy(skills), tools=proxy))
    tools.register(manager)
    context = SessionContext(session_id="s", permission_mode="auto")

    assert not (await proxy.run_tool("delete", {"path": "x"}, context)).is_error
    loaded = await proxy.run_tool("load_skill", {"name": "research"}, context)
    assert not loaded.is_error
    assert "Do the thing." in loaded.text

    refused = await proxy.run_tool("delete", {"path": "x"}, context)
    assert refused.is_error
    assert refused.error is not None
    assert refused.error.code == "not_allowed"
    assert (await proxy.run_tool("search", {"q": "cats"}, context)).text == "found cats"
    guide = await proxy.run_tool(
        "read_skill_file", {"name": "research", "path": "references/guide.md"}, context
    )
    assert guide.text == "guide text"


@pytest.mark.anyio
async def test_an_unknown_skill_or_file_is_a_clear_error_result(tmp_path: Path) -> None:
    _write_skill(tmp_path, "research", None)
    skills = SkillManager()
    skills.add_skill_dir(tmp_path)
    manager = ToolManager()
    SkillTools(lambda ctx: SkillSession(skills)).register(manager)

    missing = await manager.run_tool("load_skill", {"name": "nope"})
    assert missing.error is not None
    assert missing.error.code == "skill_not_found"
    escape = await manager.run_tool(
        "read_skill_file", {"name": "research", "path": "../../etc/passwd"}
    )
    assert escape.is_error
    assert escape.error is not None
    assert escape.error.code == "path_not_allowed"


@pytest.mark.anyio
async def test_load_skill_projects_into_a_sandbox_whose_files_are_not_on_the_host(
    tmp_path: Path,
) -> None:
    _write_skill(tmp_path / "skills", "research", None)
    skills = SkillManager()
    skills.add_skill_dir(tmp_path / "skills")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with create_sandbox("memory", SandboxParams(workspace=str(workspace))) as sandbox:
        projector = SandboxSkillManager(skills, sandbox)
        manager = ToolManager()
        SkillTools(lambda ctx: SkillSession(skills, sandbox=projector)).register(manager)
        result = await manager.run_tool("load_skill", {"name": "research"})
        assert not result.is_error, result.text
        inside = projector.sandbox_path("research") + "/SKILL.md"
        assert b"Do the thing." in await sandbox.read_file(inside)
        assert not any(workspace.iterdir())  # nothing was written on the host
