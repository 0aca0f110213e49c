"""The escape suite: every way out of the bubblewrap sandbox that docs/sandbox.md lists ("What the
``local`` sandbox blocks") must fail,
and the host must stay healthy afterwards."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import uuid
from pathlib import Path

import anyio
import pytest

from sagents.errors import PathNotAllowedError
from sagents.sandbox import (
    DEFAULT_SANDBOX_UID,
    ReadOnlyBind,
    Sandbox,
    SandboxLimits,
    SandboxParams,
    create_sandbox,
    open_dir_fd,
    safe_open_in,
)
from sagents.sandbox._bwrap import ETC_FILES
from sagents.sandbox._process import LocalProcess

pytestmark = pytest.mark.anyio


def _host_is_healthy() -> bool:
    return subprocess.run(["true"], check=False, timeout=30).returncode == 0


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(pid)
    return found


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def _py(sandbox: Sandbox, code: str, **kwargs: object) -> tuple[int | None, str]:
    python = sandbox.describe().python
    assert python is not None
    done = await sandbox.run([python, "-c", code], **kwargs)  # type: ignore[arg-type]
    return done.exit_code, (done.stdout + done.stderr).decode(errors="replace")


async def test_writes_outside_the_workspace_fail(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            f"for p in /etc/x /usr/x /x {outside} /root/x; do "
            f"(echo pwned > $p) 2>/dev/null && echo WROTE $p; done; true",
        ]
    )
    assert b"WROTE" not in done.stdout
    assert outside.read_text() == "original"
    assert not _exists("/usr/x")


async def test_host_secrets_are_not_readable(
    bwrap_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("SAGENTS_API_KEY", secret)
    home_file = Path.home() / f".sagents-escape-{uuid.uuid4().hex}"
    home_file.write_text(secret)
    try:
        done = await bwrap_sandbox.run(
            [
                "sh",
                "-c",
                f"cat {home_file}; env; cat /proc/1/environ; cat /proc/self/environ;"
                "for f in /proc/[0-9]*/environ; do cat $f; done; ls -a ~ /root; true",
            ]
        )
    finally:
        home_file.unlink()
    assert secret.encode() not in done.stdout + done.stderr
    assert b"PATH=" in done.stdout  # the commands did run


async def test_bwrap_itself_starts_with_a_minimal_environment(bwrap_sandbox: Sandbox) -> None:
    done = await bwrap_sandbox.run(["cat", "/proc/1/environ"])
    if os.geteuid() == 0:  # pid 1 is bubblewrap, as root: the sandbox's uid cannot read it
        assert done.stdout == b""
        assert b"Permission denied" in done.stderr
    else:
        assert sorted(done.stdout.split(b"\0")[:-1]) == [b"PATH=/usr/bin:/bin"]


async def test_the_hosts_loopback_is_unreachable(bwrap_sandbox: Sandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        _code, out = await _py(
            bwrap_sandbox,
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('CONNECTED')\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n",
        )
        assert "refused" in out
        assert "CONNECTED" not in out
        with pytest.raises(BlockingIOError):
            listener.accept()


async def test_a_fork_bomb_is_contained(bwrap_sandbox: Sandbox) -> None:
    info = bwrap_sandbox.describe()
    assert info.cgroups, "CI runs as root with writable cgroups"
    # The bomb runs in a subshell (whose failed forks end only the subshell), then "exec": the
    # outer shell needs no fork of its own once the full pids cgroup refuses them.
    with anyio.fail_after(60):
        done = await bwrap_sandbox.run(
            ["sh", "-c", "(b() { b | b & }; b); exec sleep 600"], timeout=3, max_output_bytes=1000
        )
    # Contained either way: the tree ran into its pids limit until the timeout, or the outer
    # shell's own second fork (dash forks each side of the pipe) already met the full limit.
    assert done.killed_reason == "timeout" or b"Cannot fork" in done.stderr, done
    assert _host_is_healthy()


async def test_the_process_limit_binds_even_as_root(bwrap_sandbox: Sandbox) -> None:
    code, out = await _py(
        bwrap_sandbox,
        "import os, time\n"
        "started = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        started += 1\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
        "print(started)\n",
        timeout=30,
    )
    assert code == 0, out
    assert "refused 11" in out  # EAGAIN from the pids cgroup
    assert int(out.split()[-1]) < 64  # TEST_LIMITS.processes


async def test_a_memory_bomb_is_contained(tmp_path: Path) -> None:
    limits = SandboxLimits(memory_bytes=256 * 1024**2, wall_timeout_seconds=60)
    async with create_sandbox(
        "local", SandboxParams(workspace=str(tmp_path / "ws"), limits=limits)
    ) as sandbox:
        code, out = await _py(
            sandbox,
            "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n",
        )
    assert code != 0
    assert "MemoryError" in out or (code is not None and code < 0)
    assert _host_is_healthy()


def _memory_cgroup_of(pid: int) -> tuple[str, str]:
    """The memory cgroup directory of ``pid`` and its limit file (v1 or v2)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return f"/sys/fs/cgroup/memory{path}", "memory.limit_in_bytes"
    path = next(
        line.split(":", 2)[2]
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        if line.startswith("0::")
    )
    return f"/sys/fs/cgroup{path}", "memory.max"


def _hogs_script(python: str | None, count: int, mib: int, marker: str) -> str:
    """A sh script that starts ``count`` hogs at once, each holding ``mib`` MiB: each says
    "held" (its last argument is ``marker``) and waits for the spawn's stdin to close, or says
    "exit N" (N = 137 when killed) if it ended first.

    A background command of a non-interactive sh reads /dev/null (POSIX, "Asynchronous
    Lists"): the hogs would get EOF at once and exit, so they read the spawn's stdin through
    fd 3, a copy made first."""
    code = f"b = b'x' * ({mib} * 2**20); print('held', flush=True); input()"
    hog = f'({python} -c "{code}" {marker} <&3; echo "exit $?")'
    numbers = " ".join(str(i) for i in range(count))
    return f"exec 3<&0; for i in {numbers}; do {hog} & done; wait"


def _memory_limited_sandbox(tmp_path: Path) -> Sandbox:
    """A ``local`` sandbox whose tree may use 200 MiB (RLIMIT_AS: 200 MiB per process)."""
    limits = SandboxLimits(memory_bytes=200 * 1024**2, wall_timeout_seconds=60)
    return create_sandbox("local", SandboxParams(workspace=str(tmp_path / "ws"), limits=limits))


async def test_every_process_of_the_tree_is_in_the_memory_limited_cgroup(
    tmp_path: Path,
) -> None:
    marker = f"hog-{uuid.uuid4().hex[:8]}"
    async with _memory_limited_sandbox(tmp_path) as sandbox:
        assert sandbox.describe().cgroups
        script = _hogs_script(sandbox.describe().python, 2, 50, marker)
        async with sandbox.spawn(["sh", "-c", script], stdin=True) as proc:
            assert proc.stdout is not None
            assert isinstance(proc, LocalProcess)
            seen = b""
            with anyio.fail_after(60):
                while seen.count(b"held") + seen.count(b"exit") < 2:
                    seen += await proc.stdout.receive()
            directory, limit_file = _memory_cgroup_of(proc.pid)
            limit = _read(f"{directory}/{limit_file}")
            members = set(_read(f"{directory}/cgroup.procs").split())
            tree = _descendants(proc.pid)
            hogs = {pid for pid in tree if _argv(pid)[-1:] == [marker]}
            stdins = [_stdin_of(pid) for pid in sorted(hogs)]
            usage_file = (
                "memory.usage_in_bytes" if limit_file.endswith("bytes") else "memory.current"
            )
            # A page is charged when it is faulted in: each hog's were before it said "held".
            usage = int(_read(f"{directory}/{usage_file}"))
            held_after = [_resident_bytes(pid) for pid in sorted(hogs)]
            await proc.kill()
    assert int(limit) == 200 * 1024**2
    assert seen.count(b"held") == 2, seen
    assert len(hogs) == 2, (sorted(tree), seen)
    assert len(tree) >= 5  # bwrap, its pid 1, sh, two hogs
    assert all(stdin.startswith("pipe:") for stdin in stdins), stdins  # not /dev/null: they wait
    assert tree <= members
    # Each hog still held its 50 MiB after the usage was read, so it did while it was read.
    assert all(held >= 50 * 1024**2 for held in held_after), held_after
    assert usage >= 2 * 50 * 1024**2, usage  # both hogs' memory is charged to the cgroup


async def test_a_memory_bomb_split_over_processes_is_contained_by_the_cgroup(
    tmp_path: Path,
) -> None:
    # Four hogs of 80 MiB, each far below its RLIMIT_AS (200 MiB), 320 MiB together: only the
    # tree's memory cgroup (200 MiB) can stop them.
    async with _memory_limited_sandbox(tmp_path) as sandbox:
        assert sandbox.describe().cgroups
        script = _hogs_script(sandbox.describe().python, 4, 80, "hog")
        async with sandbox.spawn(["sh", "-c", script], stdin=True) as proc:
            assert proc.stdout is not None
            assert isinstance(proc, LocalProcess)
            seen = b""
            with anyio.fail_after(60):
                # Until two were killed (at most two can hold at once), or all four hold and
                # none was killed (no limit: fail at once rather than at the timeout).
                while seen.count(b"exit 137") < 2 and not (
                    seen.count(b"held") == 4 and b"exit" not in seen
                ):
                    seen += await proc.stdout.receive()
            directory, limit_file = _memory_cgroup_of(proc.pid)  # entered: the tree runs
            v1 = limit_file.endswith("bytes")
            peak = int(_read(f"{directory}/memory.{'max_usage_in_bytes' if v1 else 'peak'}"))
            await proc.kill()
    # Three holding at once would be 240 MiB; a hog may still say "held" after another was
    # killed and its memory freed, so it is the kills and the peak that show the limit held.
    assert seen.count(b"exit 137") >= 2, seen  # killed (SIGKILL) inside the sandbox
    assert peak <= 200 * 1024**2
    assert _host_is_healthy()


def _argv(pid: str) -> list[str]:
    """The arguments of ``pid`` (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def _stdin_of(pid: str) -> str:
    """What ``pid``'s descriptor 0 is (``pipe:[N]``, ``/dev/null``...; empty when it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/fd/0")
    except OSError:
        return ""


def _resident_bytes(pid: str) -> int:
    """The resident memory of ``pid`` (0 when it is gone or exiting)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    rss = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(rss[0]) * 1024 if rss else 0


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _descendants(pid: int) -> set[str]:
    children: dict[str, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = _read(f"/proc/{entry}/stat").rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(entry)
    found, todo = {str(pid)}, [str(pid)]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


async def test_exceeding_the_write_budget_ends_the_run(bwrap_sandbox: Sandbox) -> None:
    with anyio.fail_after(60):
        done = await bwrap_sandbox.run(
            [
                "sh",
                "-c",
                "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero > f$i; "
                "i=$((i+1)); sleep 0.02; done",
            ]
        )
    assert done.killed_reason == "write_budget"
    assert len(await bwrap_sandbox.glob("f*")) < 200


async def test_private_tmp_is_size_bounded(bwrap_sandbox: Sandbox) -> None:
    done = await bwrap_sandbox.run(["sh", "-c", "head -c 33554432 /dev/zero > /tmp/big"])
    assert done.exit_code != 0
    assert b"No space left" in done.stderr


async def test_proc_shows_only_the_sandbox(bwrap_sandbox: Sandbox) -> None:
    host_pid = os.getpid()
    code, out = await _py(
        bwrap_sandbox,
        "import json, os\n"
        "print(max(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        f"print(os.path.exists('/proc/{host_pid}/root'))\n"
        "print(json.dumps(sorted(os.listdir('/root')) if os.path.isdir('/root') else []))\n",
    )
    assert code == 0, out
    highest_pid, host_pid_visible, root_home = out.splitlines()
    assert int(highest_pid) < 10  # only the sandbox's own few processes
    assert host_pid_visible == "False"
    # The sandbox's own /root holds at most the Python runtime's mount point (pyenv).
    assert set(json.loads(root_home)) <= {".pyenv"}


async def test_symlinks_out_of_the_workspace_lead_nowhere(
    bwrap_sandbox: Sandbox, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("safe")
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            f"ln -s /etc/passwd passwd && ln -s {victim} victim && "
            "(echo pwned > victim) 2>/dev/null; cat victim; true",
        ]
    )
    assert b"safe" not in done.stdout
    assert victim.read_text() == "safe"
    with pytest.raises(PathNotAllowedError):
        await bwrap_sandbox.read_file("passwd")
    with pytest.raises(PathNotAllowedError):
        await bwrap_sandbox.write_file("victim", b"pwned")
    assert victim.read_text() == "safe"


async def test_no_process_outlives_the_sandbox(bwrap_sandbox: Sandbox) -> None:
    marker = f"sagents-escape-{uuid.uuid4().hex}"
    python = bwrap_sandbox.describe().python
    assert python is not None
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            f"setsid nohup {python} -c 'import time; time.sleep(600)' {marker} "
            "> /dev/null 2>&1 < /dev/null & echo started",
        ]
    )
    assert done.stdout == b"started\n"
    assert _processes_with(marker) == []


async def test_no_host_descriptor_is_inherited(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    leaked = os.open(tmp_path, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        code, out = await _py(
            bwrap_sandbox,
            "import os\n"
            "open_fds = []\n"
            "for fd in range(3, 4096):\n"
            "    try:\n"
            "        os.fstat(fd)\n"
            "        open_fds.append(fd)\n"
            "    except OSError:\n"
            "        pass\n"
            "print(open_fds)\n",
        )
    finally:
        os.close(leaked)
    assert (code, out) == (0, "[]\n")


async def test_a_host_writer_is_not_tricked_by_a_planted_symlink(
    bwrap_sandbox: Sandbox, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    dir_fd = open_dir_fd(str(workspace))  # opened before the sandbox plants anything
    victim = tmp_path / "victim.txt"
    victim.write_text("safe")
    (tmp_path / "victim_dir").mkdir()
    try:
        await bwrap_sandbox.run(
            ["sh", "-c", f"ln -s {victim} output.txt; ln -s {tmp_path}/victim_dir records"]
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with pytest.raises(PathNotAllowedError):
            safe_open_in(dir_fd, "output.txt", flags)
        with pytest.raises(PathNotAllowedError):
            safe_open_in(dir_fd, "records/calls.jsonl", flags)
    finally:
        os.close(dir_fd)
    assert victim.read_text() == "safe"
    assert list((tmp_path / "victim_dir").iterdir()) == []


async def test_agent_dir_is_read_only_inside(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            "(touch .agent/forged) 2>/dev/null && echo TOUCHED; "
            "(mv .agent moved) 2>/dev/null && echo MOVED; "
            "(rm -rf .agent) 2>/dev/null; test -d .agent && echo STILL_THERE",
        ]
    )
    assert done.stdout == b"STILL_THERE\n"
    assert not (tmp_path / "ws" / ".agent" / "forged").exists()


async def test_read_only_mode_makes_the_workspace_read_only_inside(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "keep.txt").write_text("keep")
    async with create_sandbox("local", workspace=str(tmp_path / "ws"), mode="read_only") as sb:
        done = await sb.run(["sh", "-c", "cat keep.txt; echo x > keep.txt; echo y > new.txt"])
        with pytest.raises(PathNotAllowedError):
            await sb.write_file("new.txt", b"y")
    assert done.stdout == b"keep"
    assert b"Read-only file system" in done.stderr
    assert (tmp_path / "ws" / "keep.txt").read_text() == "keep"
    assert not (tmp_path / "ws" / "new.txt").exists()


async def test_read_only_binds_cannot_be_remounted_or_unmounted(
    bwrap_sandbox: Sandbox, tmp_path: Path
) -> None:
    probe = f"sagents-escape-{uuid.uuid4().hex}"
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            "mount -o remount,rw,bind /usr; mount -o remount,rw,bind .agent; umount .agent;"
            "unshare -Urm sh -c 'mount -o remount,rw,bind /usr';"
            f"touch /usr/{probe} .agent/{probe}; grep CapEff /proc/self/status",
        ]
    )
    assert b"CapEff:\t0000000000000000" in done.stdout
    assert not _exists(f"/usr/{probe}")
    assert not _exists(str(tmp_path / "ws" / ".agent" / probe))


async def test_host_sysctls_cannot_be_opened_for_writing(bwrap_sandbox: Sandbox) -> None:
    # Without a user namespace the program is uid 0 of the host (with no capability); sysctl
    # writes check only the uid, so a writable /proc/sys would let it set kernel.core_pattern
    # to "|/workspace-on-the-host/x" and have the host kernel run x as root.
    code, out = await _py(
        bwrap_sandbox,
        "import os\n"
        "for path in ('/proc/sys/kernel/core_pattern', '/proc/sys/vm/overcommit_memory'):\n"
        "    try:\n"
        "        os.close(os.open(path, os.O_WRONLY))\n"
        "        print('OPENED', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n",
    )
    assert code == 0, out
    assert "OPENED" not in out
    # EROFS, or EACCES first where the program is not root (the host ran as root)
    assert out.count("refused 30") + out.count("refused 13") == 2


async def test_dev_and_dev_shm_do_not_bypass_the_tmp_size(bwrap_sandbox: Sandbox) -> None:
    done = await bwrap_sandbox.run(
        [
            "sh",
            "-c",
            "head -c 33554432 /dev/zero > /dev/shm/big; echo shm $?; "
            "head -c 1048576 /dev/zero > /dev/big; echo dev $?",
        ]
    )
    assert b"shm 1" in done.stdout, done.stderr
    assert b"dev 2" in done.stdout, done.stderr  # the shell cannot create it: read-only
    assert b"No space left" in done.stderr


async def test_unlinked_files_held_open_count_against_the_write_budget(
    bwrap_sandbox: Sandbox,
) -> None:
    # 24 MiB in files deleted right after creation, kept open: invisible to a directory scan,
    # but on the host's disk all the same (TEST_LIMITS.write_budget_bytes is 8 MiB).
    code = (
        "import os, time\n"
        "held = []\n"
        "for i in range(6):\n"
        "    fd = os.open(f'hidden{i}', os.O_CREAT | os.O_RDWR)\n"
        "    os.unlink(f'hidden{i}')\n"
        "    os.write(fd, b'x' * (4 * 1024 * 1024))\n"
        "    held.append(fd)\n"
        "print('written', flush=True)\n"
        "time.sleep(600)\n"
    )
    python = bwrap_sandbox.describe().python
    assert python is not None
    with anyio.fail_after(60):
        done = await bwrap_sandbox.run([python, "-c", code], timeout=30)
    assert b"Error" not in done.stderr, done.stderr
    assert done.killed_reason == "write_budget"


async def test_unlinked_files_held_by_a_mapping_count_against_the_write_budget(
    bwrap_sandbox: Sandbox,
) -> None:
    code = (
        "import mmap, os, time\n"
        "maps = []\n"
        "for i in range(6):\n"
        "    fd = os.open(f'mapped{i}', os.O_CREAT | os.O_RDWR)\n"
        "    os.unlink(f'mapped{i}')\n"
        "    os.write(fd, b'x' * (4 * 1024 * 1024))\n"
        "    maps.append(mmap.mmap(fd, 4 * 1024 * 1024))\n"
        "    os.close(fd)\n"
        "print('written', flush=True)\n"
        "time.sleep(600)\n"
    )
    python = bwrap_sandbox.describe().python
    assert python is not None
    with anyio.fail_after(60):
        done = await bwrap_sandbox.run([python, "-c", code], timeout=30)
    assert b"Error" not in done.stderr, done.stderr
    assert done.killed_reason == "write_budget"


async def test_many_empty_files_count_against_the_write_budget(bwrap_sandbox: Sandbox) -> None:
    # Empty files take no data block but an inode each: a loop of them exhausts the host
    # filesystem's inodes without growing the byte count.
    code = (
        "import os, time\n"
        "for i in range(5000):\n"
        "    os.close(os.open(f'empty{i}', os.O_CREAT | os.O_WRONLY))\n"
        "print('created', flush=True)\n"
        "time.sleep(600)\n"
    )
    python = bwrap_sandbox.describe().python
    assert python is not None
    with anyio.fail_after(60):
        done = await bwrap_sandbox.run([python, "-c", code], timeout=30)
    assert done.killed_reason == "write_budget"


async def test_no_set_user_id_file_can_be_planted_in_the_workspace(
    bwrap_sandbox: Sandbox, tmp_path: Path
) -> None:
    # The sandbox's uid 0 is the host's root: a set-user-ID copy of a shell in the workspace
    # (nosuid only inside) would give root to any local user who can reach the workspace.
    python = bwrap_sandbox.describe().python
    assert python is not None
    script = (
        "cp /bin/sh suid-sh; chmod 4755 suid-sh; chmod g+s suid-sh; "
        f'{python} -c "import os\n'
        "for call in (lambda: os.open('by-open', os.O_CREAT | os.O_WRONLY, 0o4755),\n"
        "             lambda: os.mknod('by-mknod', 0o104755),\n"
        "             lambda: os.chmod('suid-sh', 0o2755)):\n"
        "    try:\n"
        "        call()\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n"
        '"; chmod 700 suid-sh && echo plain-chmod-ok'
    )
    done = await bwrap_sandbox.run(["sh", "-c", script])
    assert done.stdout == b"refused 1\nrefused 1\nrefused 1\nplain-chmod-ok\n", done.stderr
    for path in (tmp_path / "ws").rglob("*"):
        assert not path.lstat().st_mode & 0o6000, path


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch happens for root only")


@needs_root
async def test_a_root_owned_private_file_in_a_bound_directory_is_not_readable(
    tmp_path: Path,
) -> None:
    bound = tmp_path / "bound"
    bound.mkdir()
    secret = f"private-{uuid.uuid4().hex}"
    (bound / "server.key").write_text(secret)
    (bound / "server.key").chmod(0o600)
    (bound / "public.txt").write_text("public")
    params = SandboxParams(
        workspace=str(tmp_path / "ws"),
        limits=SandboxLimits(wall_timeout_seconds=60.0),
        extra_ro_binds=(ReadOnlyBind(host_path=str(bound), sandbox_path="/opt/bound"),),
    )
    async with create_sandbox("local", params) as sandbox:
        done = await sandbox.run(
            ["sh", "-c", "cat /opt/bound/public.txt; echo; cat /opt/bound/server.key; echo $?"]
        )
    assert secret.encode() not in done.stdout
    assert done.stdout.startswith(b"public\n")
    assert b"Permission denied" in done.stderr


@needs_root
async def test_programs_run_as_an_unprivileged_uid_without_any_capability(
    bwrap_sandbox: Sandbox,
) -> None:
    done = await bwrap_sandbox.run(
        ["sh", "-c", "id -u; id -g; id -G; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status"]
    )
    lines = done.stdout.decode().splitlines()
    assert lines[:3] == [str(DEFAULT_SANDBOX_UID)] * 3  # no supplementary group either
    assert [line.split()[1] for line in lines[3:]] == ["0000000000000000"] * 5
    assert bwrap_sandbox.describe().uid == DEFAULT_SANDBOX_UID
    assert not [w for w in bwrap_sandbox.describe().warnings if "root" in w]


@needs_root
async def test_the_sandbox_uid_is_configurable_and_root_is_only_kept_with_a_warning(
    tmp_path: Path,
) -> None:
    for uid, expected in ((12345, "12345"), (0, "0")):
        params = SandboxParams(workspace=str(tmp_path / f"ws{uid}"), sandbox_uid=uid)
        async with create_sandbox("local", params) as sandbox:
            done = await sandbox.run(["id", "-u"])
            warned = [w for w in sandbox.describe().warnings if "host's root" in w]
        assert done.stdout.decode().strip() == expected
        assert bool(warned) == (uid == 0)


async def test_etc_holds_only_the_allowlisted_world_readable_files(bwrap_sandbox: Sandbox) -> None:
    code, out = await _py(
        bwrap_sandbox,
        "import json, os\n"
        "found = []\n"
        "for top, dirs, files in os.walk('/etc'):\n"
        "    for name in files + dirs:\n"
        "        path = os.path.join(top, name)\n"
        "        if name in files or os.path.islink(path):\n"
        "            found.append([path, os.path.islink(path)])\n"
        "print(json.dumps(sorted(found)))\n"
        "print(open('/etc/passwd').read())\n",
    )
    assert code == 0, out
    listing, passwd = out.split("\n", 1)
    allowed = {f"/etc/{name}" for name in (*ETC_FILES, "passwd", "group")}
    for path, is_link in json.loads(listing):
        if path.startswith("/etc/alternatives/"):
            assert is_link, path  # recreated as a symlink, never bound
        else:
            assert path in allowed, path
    assert not any(path.startswith("/etc/ssl/private") for path, _ in json.loads(listing))
    names = {line.split(":")[0] for line in passwd.splitlines() if line}
    assert names <= {"root", "sandbox", "nobody"}  # not the host's user list


def _host_alternatives() -> dict[str, str]:
    top = "/etc/alternatives"
    return {
        name: os.readlink(f"{top}/{name}")
        for name in os.listdir(top)
        if os.path.islink(f"{top}/{name}")
    }


async def test_commands_behind_etc_alternatives_run_and_links_to_manual_pages_are_absent(
    bwrap_sandbox: Sandbox,
) -> None:
    links = _host_alternatives()
    script = "awk 'BEGIN { print 6 * 7 }'; ls -A /etc/alternatives"
    done = await bwrap_sandbox.run(["sh", "-c", script])
    assert done.exit_code == 0, done.stderr
    answer, *inside = done.stdout.decode().split()
    assert answer == "42"  # awk is Debian's mawk, reached through /etc/alternatives/awk
    assert set(inside) == {name for name, target in links.items() if "/man/" not in target}


async def test_a_user_namespace_cannot_be_created_inside(bwrap_sandbox: Sandbox) -> None:
    code, out = await _py(
        bwrap_sandbox,
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
        "print(libc.syscall(435, 0, 0), ctypes.get_errno())\n",  # clone3 (x86-64, aarch64)
    )
    assert code == 0, out
    unshare_line, clone3_line = out.splitlines()
    assert unshare_line.split()[0] == "-1"
    assert clone3_line.split() == ["-1", str(38)]  # ENOSYS
    done = await bwrap_sandbox.run(["sh", "-c", "unshare -U true && echo CREATED"])
    assert b"CREATED" not in done.stdout


async def test_files_the_host_writes_can_be_changed_by_the_sandbox(bwrap_sandbox: Sandbox) -> None:
    await bwrap_sandbox.mkdir("notes")
    await bwrap_sandbox.write_file("notes/a.txt", b"one\n")
    done = await bwrap_sandbox.run(
        ["sh", "-c", "echo two >> notes/a.txt && touch notes/b.txt && cat notes/a.txt"]
    )
    assert done.stdout == b"one\ntwo\n", done.stderr
    assert await bwrap_sandbox.exists("notes/b.txt")


@needs_root
async def test_an_existing_workspace_keeps_its_owner_and_a_users_runs_as_that_user(
    tmp_path: Path,
) -> None:
    root_owned = tmp_path / "project"
    root_owned.mkdir()
    users = tmp_path / "alice"
    users.mkdir()
    os.chown(users, 4321, 4321)
    seen = []
    for workspace in (root_owned, users):
        params = SandboxParams(workspace=str(workspace))
        async with create_sandbox("local", params) as sandbox:
            done = await sandbox.run(["sh", "-c", "id -u; touch made && echo wrote"])
        seen.append(done.stdout.decode().split())
    assert seen == [[str(DEFAULT_SANDBOX_UID), "wrote"], ["4321", "wrote"]]
    assert root_owned.stat().st_uid == 0  # an ACL entry, not a new owner
    assert users.stat().st_uid == 4321
    assert (users / "made").stat().st_uid == 4321


def _add_session_key(description: bytes, payload: bytes) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    key = libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", description,
                       payload, len(payload), ctypes.c_long(-3))  # fmt: skip
    if key < 0:
        pytest.skip(f"no session keyring here (errno {ctypes.get_errno()})")
    return int(key)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
async def test_keys_in_the_hosts_session_keyring_are_not_readable(bwrap_sandbox: Sandbox) -> None:
    secret = uuid.uuid4().hex.encode()
    key = _add_session_key(b"sagents-escape", secret)
    keyctl = 250 if os.uname().machine == "x86_64" else 219
    code, out = await _py(
        bwrap_sandbox,
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "buf = ctypes.create_string_buffer(64)\n"
        f"print(libc.syscall({keyctl}, 11, ctypes.c_long({key}), buf, 64), ctypes.get_errno())\n"
        "print(buf.value)\n",
    )
    assert code == 0, out
    assert secret.decode() not in out
    assert out.splitlines()[0] == "-1 38"  # ENOSYS: no key management call at all


_FAMILY_PROBE = """\
import socket
for name, family, kind in [
    ("AF_VSOCK", 40, socket.SOCK_STREAM),
    ("AF_PACKET", 17, socket.SOCK_RAW),
    ("AF_ALG", 38, socket.SOCK_SEQPACKET),
    ("AF_BLUETOOTH", 31, socket.SOCK_STREAM),
    ("AF_UNIX", 1, socket.SOCK_STREAM),
    ("AF_INET", 2, socket.SOCK_STREAM),
    ("AF_INET6", 10, socket.SOCK_STREAM),
    ("AF_NETLINK", 16, socket.SOCK_RAW),
]:
    try:
        socket.socket(family, kind).close()
        print(name, "CREATED")
    except OSError as exc:
        print(name, exc.errno)
for name, family in [("pair_AF_VSOCK", 40), ("pair_AF_UNIX", 1)]:
    try:
        for end in socket.socketpair(family, socket.SOCK_STREAM):
            end.close()
        print(name, "CREATED")
    except OSError as exc:
        print(name, exc.errno)
"""


async def test_only_the_needed_socket_families_can_be_created(bwrap_sandbox: Sandbox) -> None:
    _code, out = await _py(bwrap_sandbox, _FAMILY_PROBE)
    results = dict(line.split(" ", 1) for line in out.splitlines())
    for family in ("AF_VSOCK", "AF_PACKET", "AF_ALG", "AF_BLUETOOTH", "pair_AF_VSOCK"):
        # refused by the filter, whatever this kernel would have answered
        assert results[family] == str(errno.EAFNOSUPPORT), out
    for family in ("AF_UNIX", "AF_INET", "AF_INET6", "pair_AF_UNIX"):
        assert results[family] == "CREATED", out
    assert results["AF_NETLINK"] == "CREATED", out  # the C library's getaddrinfo asks the kernel
