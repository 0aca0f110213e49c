import json
from pathlib import Path

import anyio
import pytest

from sagents.errors import SkillNotFoundError
from sagents.skill import SandboxSkillManager, SkillManager, SkillProxy
from sagents.skill._sandbox_sync import MANIFEST_NAME
from tests.skill.helpers import MemoryFiles, copy_fixture, spec_md, write_skill

Setup = tuple[SkillManager, Path, MemoryFiles, SandboxSkillManager]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    root = copy_fixture("seed_root", tmp_path)
    write_skill(root, "other", spec_md("other"))
    manager = SkillManager()
    manager.add_skill_dir(root)
    files = MemoryFiles()
    proxy = SkillProxy(manager, available_skills=["my_skill", "other"])
    return manager, root / "my_skill", files, SandboxSkillManager(proxy, files, root="/ws/skills")


def _edit_on_host(path: Path, text: str, manager: SkillManager) -> None:
    path.write_text(text)
    manager.reload()


@pytest.mark.anyio
async def test_loading_a_skill_copies_only_that_skill_through_the_file_api(setup: Setup) -> None:
    _, _, files, sandbox = setup
    with anyio.fail_after(5):
        loaded = await sandbox.load("my_skill")
    assert loaded.location == "/ws/skills/my_skill"
    assert files.files["/ws/skills/my_skill/scripts/run.py"] == b'print("digest")\n'
    assert "/ws/skills/my_skill/SKILL.md" in files.files
    assert not any(path.startswith("/ws/skills/other") for path in files.files)
    manifest = json.loads(files.files[f"/ws/skills/my_skill/{MANIFEST_NAME}"])
    assert set(manifest["files"]) == {"SKILL.md", "scripts/run.py", "skill.yaml"}


@pytest.mark.anyio
async def test_a_second_projection_with_no_change_writes_only_the_manifest(setup: Setup) -> None:
    _, _, files, sandbox = setup
    await sandbox.project("my_skill")
    files.writes.clear()
    result = await sandbox.project("my_skill")
    assert set(result.outcomes.values()) == {"unchanged"}
    assert files.writes == [f"/ws/skills/my_skill/{MANIFEST_NAME}"]


@pytest.mark.anyio
async def test_a_host_update_reaches_an_untouched_sandbox_copy(setup: Setup) -> None:
    manager, host, files, sandbox = setup
    await sandbox.project("my_skill")
    _edit_on_host(host / "scripts" / "run.py", "print('v2')\n", manager)
    result = await sandbox.project("my_skill")
    assert result.outcomes["scripts/run.py"] == "updated"
    assert files.files["/ws/skills/my_skill/scripts/run.py"] == b"print('v2')\n"
    assert result.conflicts == ()


@pytest.mark.anyio
async def test_a_workspace_edit_is_kept_when_the_host_did_not_change(setup: Setup) -> None:
    _, _, files, sandbox = setup
    await sandbox.project("my_skill")
    files.files["/ws/skills/my_skill/scripts/run.py"] = b"print('mine')\n"
    result = await sandbox.project("my_skill")
    assert result.outcomes["scripts/run.py"] == "kept_local_edit"
    assert files.files["/ws/skills/my_skill/scripts/run.py"] == b"print('mine')\n"


@pytest.mark.anyio
async def test_a_workspace_edit_and_a_host_update_keep_both_and_report_a_conflict(
    setup: Setup,
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, host, files, sandbox = setup
    await sandbox.project("my_skill")
    files.files["/ws/skills/my_skill/scripts/run.py"] = b"print('mine')\n"
    _edit_on_host(host / "scripts" / "run.py", "print('v2')\n", manager)
    result = await sandbox.project("my_skill")
    assert result.conflicts == ("scripts/run.py",)
    assert files.files["/ws/skills/my_skill/scripts/run.py"] == b"print('mine')\n"
    assert files.files["/ws/skills/my_skill/scripts/run.py.from-host"] == b"print('v2')\n"
    assert "scripts/run.py" in caplog.text
    again = await sandbox.project("my_skill")  # reported once per host change
    assert again.outcomes["scripts/run.py"] == "kept_local_edit"


@pytest.mark.anyio
async def test_a_new_host_file_and_a_user_added_file_both_survive(setup: Setup) -> None:
    manager, host, files, sandbox = setup
    await sandbox.project("my_skill")
    files.files["/ws/skills/my_skill/notes.txt"] = b"user notes"
    (host / "assets").mkdir()
    _edit_on_host(host / "assets" / "template.txt", "T", manager)
    result = await sandbox.project("my_skill")
    assert result.outcomes["assets/template.txt"] == "created"
    assert files.files["/ws/skills/my_skill/assets/template.txt"] == b"T"
    assert files.files["/ws/skills/my_skill/notes.txt"] == b"user notes"


@pytest.mark.anyio
async def test_an_unreadable_manifest_turns_differences_into_conflicts_not_overwrites(
    setup: Setup,
) -> None:
    _, _, files, sandbox = setup
    await sandbox.project("my_skill")
    files.files["/ws/skills/my_skill/scripts/run.py"] = b"print('mine')\n"
    files.files[f"/ws/skills/my_skill/{MANIFEST_NAME}"] = b"{not json"
    result = await sandbox.project("my_skill")
    assert result.manifest_reset
    assert result.conflicts == ("scripts/run.py",)
    assert files.files["/ws/skills/my_skill/scripts/run.py"] == b"print('mine')\n"


@pytest.mark.anyio
async def test_a_skill_outside_the_session_is_not_projected(setup: Setup) -> None:
    manager, _, files, _ = setup
    sandbox = SandboxSkillManager(SkillProxy(manager, available_skills=["other"]), files)
    with pytest.raises(SkillNotFoundError):
        await sandbox.project("my_skill")
    assert files.files == {}


@pytest.mark.anyio
async def test_the_host_skill_directory_is_never_modified(setup: Setup) -> None:
    _, host, files, sandbox = setup
    before = {p: p.read_bytes() for p in host.rglob("*") if p.is_file()}
    await sandbox.project("my_skill")
    files.files["/ws/skills/my_skill/SKILL.md"] = b"edited in sandbox"
    await sandbox.project("my_skill")
    assert {p: p.read_bytes() for p in host.rglob("*") if p.is_file()} == before


@pytest.mark.anyio
async def test_the_default_root_is_inside_the_sandbox_workspace(setup: Setup) -> None:
    manager, _, files, _ = setup
    sandbox = SandboxSkillManager(manager, files)
    loaded = await sandbox.load("other")
    assert loaded.location == ".skills/other"
    assert "/workspace/.skills/other/SKILL.md" in files.files


@pytest.mark.anyio
async def test_concurrent_loads_of_one_skill_project_it_once_consistently(setup: Setup) -> None:
    _, _, files, sandbox = setup
    results = []

    async def load() -> None:
        results.append(await sandbox.project("my_skill"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(load)
    kinds = [set(result.outcomes.values()) for result in results]
    assert all(len(kind) == 1 for kind in kinds)
    assert sorted(kind.pop() for kind in kinds) == [
        "created",
        "unchanged",
        "unchanged",
        "unchanged",
    ]
    assert files.writes.count("/ws/skills/my_skill/scripts/run.py") == 1
