from pathlib import Path

import anyio
import pytest

from sagents.errors import SkillError, SkillNotFoundError
from sagents.skill import SandboxSkillManager, SkillManager, SkillProxy, SkillSession
from tests.skill.helpers import FakeToolProxy, MemoryFiles, copy_fixture


@pytest.fixture
def proxy(tmp_path: Path) -> SkillProxy:
    manager = SkillManager()
    manager.add_skill_dir(copy_fixture("spec_root", tmp_path))
    manager.add_skill_dir(copy_fixture("seed_root", tmp_path))
    return SkillProxy(manager, available_skills=["pdf-tools", "my_skill"])


@pytest.mark.anyio
async def test_loading_a_skill_projects_it_and_holds_the_session_to_its_tools(
    proxy: SkillProxy,
) -> None:
    files = MemoryFiles()
    tools = FakeToolProxy(
        ["file_read", "file_write", "run_script", "load_skill", "read_skill_file"]
    )
    session = SkillSession(proxy, sandbox=SandboxSkillManager(proxy, files, root="/w"), tools=tools)
    with anyio.fail_after(5):
        text = await session.load_skill("pdf-tools")
    assert "Skill files (/w/pdf-tools):" in text
    assert "/w/pdf-tools/references/forms.md" in files.files
    assert tools.allowed == {"file_read", "run_script", "load_skill", "read_skill_file"}
    assert session.active_skills == ("pdf-tools",)


@pytest.mark.anyio
async def test_without_a_sandbox_the_host_directory_is_the_location(proxy: SkillProxy) -> None:
    session = SkillSession(proxy)
    loaded = await session.load("my_skill")
    skill = proxy.get_skill("my_skill")
    assert skill is not None
    assert loaded.location == str(skill.path)


@pytest.mark.anyio
async def test_loading_an_unknown_skill_changes_nothing(proxy: SkillProxy) -> None:
    tools = FakeToolProxy(["a"])
    session = SkillSession(proxy, tools=tools)
    with pytest.raises(SkillNotFoundError):
        await session.load_skill("nope")
    assert tools.allowed == {"a"}
    assert session.active_skills == ()


def test_the_system_prompt_lists_the_session_skills(proxy: SkillProxy) -> None:
    text = SkillSession(proxy).system_prompt(max_tokens=500)
    assert "- pdf-tools:" in text
    assert "- my_skill:" in text


def test_read_skill_file_returns_text_and_refuses_binary(proxy: SkillProxy) -> None:
    session = SkillSession(proxy)
    assert session.read_skill_file("pdf-tools", "references/forms.md").startswith("# Forms")
    skill = proxy.get_skill("pdf-tools")
    assert skill is not None
    (skill.path / "references" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SkillError, match="not UTF-8"):
        session.read_skill_file("pdf-tools", "references/blob.bin")
