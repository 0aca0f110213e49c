"""The conformance suite: what every Sandbox provider must do, run against each of them."""

from __future__ import annotations

import anyio
import pytest

from sagents.errors import PathNotAllowedError, TaskNotFoundError
from sagents.sandbox import Sandbox

pytestmark = pytest.mark.anyio


async def test_provider_satisfies_the_protocol_and_describes_itself(any_sandbox: Sandbox) -> None:
    info = any_sandbox.describe()
    assert isinstance(any_sandbox, Sandbox)
    assert info.workspace.startswith("/")
    assert info.mode == "read_write"


async def test_write_then_read_returns_the_same_bytes(any_sandbox: Sandbox) -> None:
    data = "héllo wörld\n".encode() + bytes(range(256))
    path = await any_sandbox.write_file("notes.bin", data)
    assert path == any_sandbox.describe().workspace + "/notes.bin"
    assert await any_sandbox.read_file(path) == data
    assert await any_sandbox.read_file("notes.bin") == data


async def test_write_replaces_the_whole_file(any_sandbox: Sandbox) -> None:
    await any_sandbox.write_file("a.txt", b"a long first version")
    await any_sandbox.write_file("a.txt", b"short")
    assert await any_sandbox.read_file("a.txt") == b"short"


async def test_mkdir_list_stat_exists_and_remove(any_sandbox: Sandbox) -> None:
    await any_sandbox.mkdir("d/e/f")
    await any_sandbox.write_file("d/x.txt", b"12345")
    entries = await any_sandbox.list_dir("d")
    assert [(e.name, e.kind) for e in entries] == [("e", "dir"), ("x.txt", "file")]
    st = await any_sandbox.stat("d/x.txt")
    assert (st.kind, st.size) == ("file", 5)
    assert (await any_sandbox.stat("d/e")).kind == "dir"
    assert await any_sandbox.exists("d/e/f")
    await any_sandbox.remove("d/x.txt")
    assert not await any_sandbox.exists("d/x.txt")
    with pytest.raises(OSError, match=r"(?i)not empty"):
        await any_sandbox.remove("d")
    await any_sandbox.remove("d", recursive=True)
    assert not await any_sandbox.exists("d")


async def test_glob_matches_across_directories(any_sandbox: Sandbox) -> None:
    await any_sandbox.mkdir("src/pkg")
    for name in ("src/a.py", "src/pkg/b.py", "src/pkg/c.txt", "top.py"):
        await any_sandbox.write_file(name, b"")
    root = any_sandbox.describe().workspace
    assert await any_sandbox.glob("**/*.py") == [
        f"{root}/src/a.py",
        f"{root}/src/pkg/b.py",
        f"{root}/top.py",
    ]
    assert await any_sandbox.glob("src/*.py") == [f"{root}/src/a.py"]


async def test_missing_files_raise_file_not_found(any_sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        await any_sandbox.read_file("nope.txt")
    with pytest.raises(FileNotFoundError):
        await any_sandbox.write_file("no/such/dir/x.txt", b"")
    with pytest.raises(FileNotFoundError):
        await any_sandbox.stat("nope")
    assert not await any_sandbox.exists("nope")


async def test_reading_a_directory_is_a_clear_error(any_sandbox: Sandbox) -> None:
    await any_sandbox.mkdir("d")
    with pytest.raises(IsADirectoryError):
        await any_sandbox.read_file("d")


@pytest.mark.parametrize("path", ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "/"])
async def test_paths_outside_the_workspace_are_refused(any_sandbox: Sandbox, path: str) -> None:
    with pytest.raises(PathNotAllowedError):
        await any_sandbox.write_file(path, b"x")
    with pytest.raises(PathNotAllowedError):
        await any_sandbox.read_file(path)
    assert not await any_sandbox.exists(path)


async def test_glob_with_dotdot_is_refused(any_sandbox: Sandbox) -> None:
    with pytest.raises(PathNotAllowedError):
        await any_sandbox.glob("../*")


async def test_agent_dir_is_read_only_through_the_file_api(any_sandbox: Sandbox) -> None:
    with pytest.raises(PathNotAllowedError):
        await any_sandbox.write_file(".agent/records.txt", b"forged")
    with pytest.raises(PathNotAllowedError):
        await any_sandbox.mkdir(".agent/scripts")


async def test_run_captures_exit_code_and_output(any_sandbox: Sandbox) -> None:
    done = await any_sandbox.run(["echo", "hello", "sandbox"])
    assert (done.exit_code, done.stdout, done.ok) == (0, b"hello sandbox\n", True)
    failed = await any_sandbox.run(["false"])
    assert failed.exit_code == 1
    assert not failed.ok


async def test_run_caps_output_and_says_so(any_sandbox: Sandbox) -> None:
    done = await any_sandbox.run(["echo", "x" * 100], max_output_bytes=10)
    assert done.stdout == b"x" * 10
    assert done.stdout_truncated


async def test_run_sees_files_written_through_the_file_api(any_sandbox: Sandbox) -> None:
    await any_sandbox.write_file("in.txt", b"from the file api")
    done = await any_sandbox.run(["cat", "in.txt"])
    assert done.stdout == b"from the file api"


async def test_run_rejects_an_empty_argv(any_sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="argv"):
        await any_sandbox.run([])


async def test_background_output_is_read_by_offsets(any_sandbox: Sandbox) -> None:
    task_id = await any_sandbox.start(["echo", "one two three"])
    with anyio.fail_after(30):
        status = await any_sandbox.wait(task_id, timeout=30)
    assert (status.state, status.exit_code) == ("exited", 0)
    text, offset = await any_sandbox.read_background_output_range(task_id, 0, 4)
    rest, end = await any_sandbox.read_background_output_range(task_id, offset, 1000)
    assert (text, offset) == ("one ", 4)
    assert rest == "two three\n"
    assert await any_sandbox.read_background_output_range(task_id, end, 10) == ("", end)


async def test_unknown_task_ids_raise_task_not_found(any_sandbox: Sandbox) -> None:
    with pytest.raises(TaskNotFoundError):
        await any_sandbox.status("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await any_sandbox.read_background_output_range("no-such-task", 0, 10)
    with pytest.raises(TaskNotFoundError):
        await any_sandbox.kill("no-such-task")


async def test_bad_read_ranges_are_clear_errors(any_sandbox: Sandbox) -> None:
    task_id = await any_sandbox.start(["echo", "x"])
    with pytest.raises(ValueError, match="offset"):
        await any_sandbox.read_background_output_range(task_id, -1, 10)
    with pytest.raises(ValueError, match="max_bytes"):
        await any_sandbox.read_background_output_range(task_id, 0, 0)


async def test_multibyte_output_survives_tiny_read_windows(any_sandbox: Sandbox) -> None:
    task_id = await any_sandbox.start(["echo", "a€b😀c"])
    with anyio.fail_after(30):
        await any_sandbox.wait(task_id, timeout=30)
    pieces: list[str] = []
    offset = 0
    for _ in range(32):
        text, offset = await any_sandbox.read_background_output_range(task_id, offset, 2)
        if not text:
            break
        pieces.append(text)
    assert "".join(pieces) == "a€b😀c\n"
    assert not any("\ufffd" in piece for piece in pieces)
