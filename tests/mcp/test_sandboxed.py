"""stdio servers in their own bubblewrap sandbox: the escape suite's relevant cases, tried by a
server of ours (servers/escape_server.py) through the supervisor, and the clear errors of a
sandbox that cannot work."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import StdioServerParameters

from sagents.errors import SandboxError, UpstreamUnavailableError
from sagents.mcp import MCPSupervisor, ServerSandbox, ServerSettings
from sagents.mcp import _stdio as stdio
from sagents.mcp._sandboxed import default_home_root, sandbox_params
from sagents.mcp._stdio import StdioProcess
from sagents.sandbox import DEFAULT_SANDBOX_UID, NetworkPolicy
from sagents.sandbox._bwrap import python_runtime
from tests.mcp.helpers import ROOT, SERVERS
from tests.sandbox.http_peer import http_peer

pytestmark = pytest.mark.anyio

PYTHON = python_runtime()[1]  # the base interpreter: the sandbox always shows it


def _escape_server() -> StdioServerParameters:
    return StdioServerParameters(command=PYTHON, args=[str(SERVERS / "escape_server.py")])


def _settings(tmp_path: Path, **sandbox: Any) -> ServerSettings:
    box = ServerSandbox(readable=(str(SERVERS),), home=str(tmp_path / "home"))
    return ServerSettings(connect_timeout=60.0, sandbox=replace(box, **sandbox))


@pytest.fixture
async def sup(tmp_path: Path) -> AsyncIterator[MCPSupervisor]:
    async with MCPSupervisor(log_dir=tmp_path / "logs") as supervisor:
        yield supervisor


async def _call(sup: MCPSupervisor, tool: str, **arguments: object) -> str:
    result = await sup.call_tool("escape", tool, dict(arguments))
    assert result.error is None, result
    return result.text


def _read(path: str) -> str:
    return Path(path).read_text()


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(pid)
    return found


async def test_a_sandboxed_server_cannot_read_host_secrets(
    sup: MCPSupervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("SAGENTS_API_KEY", secret)
    home_file = Path.home() / f".sagents-escape-{uuid.uuid4().hex}"
    home_file.write_text(secret)
    shown = tmp_path / "shown"
    shown.mkdir()
    private = shown / "private.txt"
    private.write_text(secret)
    private.chmod(0o600)
    settings = _settings(tmp_path, readable=(str(SERVERS), str(shown)))
    try:
        await sup.add_server("escape", _escape_server(), settings)
        environ = json.loads(await _call(sup, "environ"))
        home_read = await _call(sup, "read", path=str(home_file))
        shadow = await _call(sup, "read", path="/etc/shadow")
        private_read = await _call(sup, "read", path=str(private))
    finally:
        home_file.unlink()
    assert secret not in json.dumps(environ)
    assert environ["HOME"] == "/workspace"
    assert home_read.startswith("ERROR FileNotFoundError")  # $HOME is not shown at all
    assert shadow.startswith("ERROR FileNotFoundError")
    if os.geteuid() == 0:  # as root the server is an unprivileged uid: modes protect again
        assert private_read.startswith("ERROR PermissionError")


async def test_only_the_listed_variables_and_the_entrys_own_values_reach_the_server(
    sup: MCPSupervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ESCAPE_PASSED", "yes")
    monkeypatch.setenv("ESCAPE_KEPT_OUT", "no")
    params = _escape_server()
    params = StdioServerParameters(command=params.command, args=params.args, env={"OWN": "1"})
    settings = _settings(tmp_path, env=("ESCAPE_PASSED", "ESCAPE_UNSET"))
    await sup.add_server("escape", params, settings)
    environ = json.loads(await _call(sup, "environ"))
    assert environ["ESCAPE_PASSED"] == "yes"
    assert environ["OWN"] == "1"
    assert "ESCAPE_KEPT_OUT" not in environ
    assert "ESCAPE_UNSET" not in environ
    sandbox_own = {"PATH", "HOME", "TMPDIR", "PWD", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}
    assert set(environ) <= {"ESCAPE_PASSED", "OWN", *sandbox_own}


async def test_a_sandboxed_server_writes_only_inside_its_writable_paths(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shown = tmp_path / "shown"
    shown.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    settings = _settings(tmp_path, readable=(str(SERVERS), str(shown)), writable=(str(data),))
    await sup.add_server("escape", _escape_server(), settings)
    inside = await _call(sup, "write", path=str(data / "new.txt"), text="fine")
    attempts = {
        path: await _call(sup, "write", path=path)
        for path in (
            str(outside),
            str(shown / "x.txt"),
            str(SERVERS / "x.txt"),
            "/usr/x",
            "/etc/x",
            "/x",
            "/root/x",
        )
    }
    in_tmp = await _call(sup, "write", path="/tmp/private.txt")
    assert inside == "WROTE"
    assert (data / "new.txt").read_text() == "fine"
    assert all(text.startswith("ERROR") for text in attempts.values()), attempts
    assert outside.read_text() == "original"
    assert not (shown / "x.txt").exists()
    assert not (SERVERS / "x.txt").exists()
    assert in_tmp == "WROTE"  # its own private /tmp
    assert not _exists("/tmp/private.txt")


async def test_with_the_network_off_a_server_cannot_connect_out(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        await sup.add_server("escape", _escape_server(), _settings(tmp_path))
        answer = await _call(sup, "connect", host="127.0.0.1", port=port)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert answer.startswith("ERROR")


async def test_with_the_network_on_a_server_reaches_only_its_listed_hosts_through_the_proxy(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    async with http_peer() as port:
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}",))
        await sup.add_server("escape", _escape_server(), _settings(tmp_path, network=allow))
        fetched = await _call(sup, "fetch", url=f"http://127.0.0.1:{port}/tools")
        direct = await _call(sup, "connect", host="127.0.0.1", port=port)
        unlisted = await _call(sup, "connect", host="127.0.0.1", port=port + 1)
        other = await _call(sup, "fetch", url=f"http://127.0.0.1:{port + 1}/")
        metadata = await _call(sup, "fetch", url="http://169.254.169.254/latest/meta-data/")
    own = await _call(sup, "unix_pair")  # an abstract socket of its own tree still works
    assert fetched == "HTTP 200 peer /tools"
    assert direct == "CONNECTED"  # the listed loopback port, tunnelled by the forwarder
    assert unlisted.startswith("ERROR"), unlisted  # the host's loopback is not in its namespace
    assert other.startswith("HTTP 403 sagents egress proxy refused"), other
    assert "not listed in network.allow" in other
    assert metadata.startswith("HTTP 403"), metadata
    assert own == "PAIRED"


async def test_a_sandboxed_server_cannot_reach_the_gateways_port_even_when_listed(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    with socket.socket() as gateway:  # a port of this process, as the gateway's /mcp is
        gateway.bind(("127.0.0.1", 0))
        gateway.listen()
        port = gateway.getsockname()[1]
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}", "*"))
        await sup.add_server("escape", _escape_server(), _settings(tmp_path, network=allow))
        answer = await _call(sup, "fetch", url=f"http://127.0.0.1:{port}/console/approvals")
    assert answer.startswith("HTTP 403"), answer
    assert "a port of the gateway (this host process) itself" in answer


@pytest.mark.parametrize("network", [False, True])
async def test_a_sandboxed_server_cannot_create_a_vsock_socket(
    sup: MCPSupervisor, tmp_path: Path, network: bool
) -> None:
    await sup.add_server("escape", _escape_server(), _settings(tmp_path, network=network))
    answer = await _call(sup, "vsock")
    assert answer.startswith(f"ERROR OSError: [Errno {errno.EAFNOSUPPORT}]"), answer


@contextmanager
def _abstract_listener() -> Iterator[tuple[str, socket.socket]]:
    """A host listener on an abstract Unix socket (no file: scoped by the network namespace)."""
    name = f"sagents-escape-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen()
        listener.setblocking(False)
        yield name, listener


@pytest.mark.parametrize("network", [False, True])
async def test_a_sandboxed_server_cannot_reach_the_hosts_abstract_unix_sockets(
    sup: MCPSupervisor, tmp_path: Path, network: bool
) -> None:
    with _abstract_listener() as (name, listener):
        await sup.add_server("escape", _escape_server(), _settings(tmp_path, network=network))
        answer = await _call(sup, "connect_unix", name=name)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert answer.startswith("ERROR"), answer  # not in the server's network namespace


async def test_closing_a_sandboxed_server_ends_its_whole_tree(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    marker = f"sagents-escape-{uuid.uuid4().hex}"
    await sup.add_server("escape", _escape_server(), _settings(tmp_path))
    assert await _call(sup, "orphan", marker=marker) == "STARTED"
    assert _processes_with(marker) != []  # the grandchild runs, in a session of its own
    await sup.remove_server("escape")
    assert _processes_with(marker) == []


async def test_a_fork_bomb_of_a_sandboxed_server_is_contained(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    await sup.add_server("escape", _escape_server(), _settings(tmp_path, max_processes=16))
    answer = await _call(sup, "fork", n=200)
    assert "ERROR 11" in answer  # EAGAIN from the pids cgroup
    assert int(answer.split()[1]) < 16
    assert (await anyio.run_process(["true"])).returncode == 0


async def test_a_memory_bomb_of_a_sandboxed_server_ends_only_that_server(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    await sup.add_server("escape", _escape_server(), _settings(tmp_path, memory_mb=96))
    result = await sup.call_tool("escape", "allocate", {"mb": 1024})
    assert result.is_error or result.text.startswith("ERROR MemoryError")
    assert (await anyio.run_process(["true"])).returncode == 0


async def test_a_sandboxed_server_sees_only_its_own_processes_and_descriptors(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    leaked = os.open(tmp_path, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        await sup.add_server("escape", _escape_server(), _settings(tmp_path))
        pids = json.loads(await _call(sup, "pids"))
        fds = json.loads(await _call(sup, "fds"))
        who = json.loads(await _call(sup, "whoami"))
    finally:
        os.close(leaked)
    assert os.getpid() not in pids
    assert max(pids) < 10
    assert fds == [0, 1, 2, 3]  # stdin, stdout, stderr and the listing's own descriptor
    if os.geteuid() == 0:
        assert who == {"uid": DEFAULT_SANDBOX_UID, "gid": DEFAULT_SANDBOX_UID, "groups": []}


async def test_a_sandboxed_server_cannot_gain_privileges_or_touch_host_sysctls(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    await sup.add_server("escape", _escape_server(), _settings(tmp_path))
    setuid = await _call(sup, "setuid")
    userns = await _call(sup, "userns")
    sysctl = await _call(sup, "sysctl")
    assert setuid.startswith("ERROR PermissionError"), setuid  # the seccomp filter
    assert userns.startswith("ERROR PermissionError"), userns
    assert sysctl.startswith("ERROR"), sysctl
    assert "/tmp/x" not in _read("/proc/sys/kernel/core_pattern")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run a server as another uid")
async def test_the_uid_of_a_sandboxed_server_can_be_chosen(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 12345, 12345)
    data.chmod(0o700)  # only its owner may write it
    settings = _settings(tmp_path, uid=12345, writable=(str(data),))
    await sup.add_server("escape", _escape_server(), settings)
    who = json.loads(await _call(sup, "whoami"))
    wrote = await _call(sup, "write", path=str(data / "mine.txt"))
    assert who == {"uid": 12345, "gid": 12345, "groups": []}
    assert wrote == "WROTE"
    assert (data / "mine.txt").stat().st_uid == 12345


async def test_a_command_the_sandbox_does_not_show_is_a_clear_error(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    command = tools / "escape-server"
    command.write_text(f"#!{PYTHON}\n" + (SERVERS / "escape_server.py").read_text())
    command.chmod(0o755)
    params = StdioServerParameters(command=str(command))
    with pytest.raises(UpstreamUnavailableError) as caught:
        await sup.add_server("escape", params, _settings(tmp_path))
    message = str(caught.value)
    assert f"{str(command)!r} is not visible inside its sandbox" in message
    assert f"add {str(tools)!r} (or a directory above it) to sandbox.readable" in message
    shown = _settings(tmp_path, readable=(str(tools),))
    await sup.add_server("escape", params, shown)
    assert await _call(sup, "write", path="/tmp/x") == "WROTE"


async def test_a_missing_sandbox_path_is_a_clear_error(sup: MCPSupervisor, tmp_path: Path) -> None:
    settings = _settings(tmp_path, writable=(str(tmp_path / "missing"),))
    with pytest.raises(UpstreamUnavailableError) as caught:
        await sup.add_server("escape", _escape_server(), settings)
    assert "does not exist" in str(caught.value)
    assert str(tmp_path / "missing") in str(caught.value)


async def test_a_server_whose_home_holds_its_quota_is_not_started(
    sup: MCPSupervisor, tmp_path: Path
) -> None:
    """The home counts against ``quotas.workspaceBytes`` (``ServerSandbox.home_bytes``): a home
    that holds it keeps the server from starting, with the setting named; a running server is
    ended once its home passes it, by the sandbox's watchdog."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "cache.bin").write_bytes(b"x" * 2 * 1024 * 1024)
    settings = _settings(tmp_path, home_bytes=1024 * 1024)
    with pytest.raises(UpstreamUnavailableError) as caught:
        await sup.add_server("escape", _escape_server(), settings)
    assert "quotas.workspaceBytes" in str(caught.value)
    (home / "cache.bin").unlink()
    await sup.add_server("other", _escape_server(), settings)
    box = sandbox_params("other", _escape_server(), settings.sandbox or ServerSandbox())
    assert box.limits.workspace_bytes == 1024 * 1024


HOLDER = """
import sys
import anyio
from pathlib import Path
from mcp import StdioServerParameters
from sagents.mcp import MCPSupervisor, ServerSandbox, ServerSettings

async def main() -> None:
    python, server, marker, root = sys.argv[1:5]
    params = StdioServerParameters(command=python, args=[server])
    box = ServerSandbox(readable=(str(Path(server).parent),), home=root + "/home")
    async with MCPSupervisor(log_dir=Path(root) / "logs") as sup:
        await sup.add_server("escape", params, ServerSettings(sandbox=box))
        await sup.call_tool("escape", "orphan", {"marker": marker})
        print(sup.status("escape").pid, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def _wait_gone(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(fd)  # the kernel makes a pidfd readable when it exits
    finally:
        os.close(fd)


async def test_a_sigkilled_host_takes_its_sandboxed_server_and_grandchildren_along(
    tmp_path: Path,
) -> None:
    marker = f"sagents-escape-{uuid.uuid4().hex}"
    server = str(SERVERS / "escape_server.py")
    command = [sys.executable, "-c", HOLDER, PYTHON, server, marker, str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as holder:
            assert holder.stdout is not None
            line = await BufferedByteReceiveStream(holder.stdout).receive_until(b"\n", 1 << 16)
            bwrap = int(line)
            orphans = [int(pid) for pid in _processes_with(marker)]
            assert orphans  # the grandchild runs, in a session of its own
            holder.kill()  # SIGKILL: no atexit hook, no finally
            await holder.wait()
            for pid in (bwrap, *orphans):
                await _wait_gone(pid)
    assert _processes_with(marker) == []


@pytest.mark.parametrize("kind", ["readable", "writable", "home"])
@pytest.mark.parametrize("where", ["data", "data/audit", "parent", "other-home", "home-root"])
def test_a_sandbox_may_not_show_the_gateways_data_or_another_servers_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, where: str
) -> None:
    data = tmp_path / "state" / "data"
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(data))
    paths = {
        "data": data,
        "data/audit": data / "audit",
        "parent": tmp_path / "state",
        "other-home": default_home_root() / "other",
        "home-root": default_home_root(),
    }
    path = paths[where]
    path.mkdir(parents=True, exist_ok=True)
    value: Any = str(path) if kind == "home" else (str(path),)
    box = replace(ServerSandbox(), **{kind: value})
    with pytest.raises(SandboxError) as caught:
        sandbox_params("escape", _escape_server(), box)
    assert str(path) in str(caught.value)
    assert caught.value.hint


def test_the_servers_own_default_home_and_unrelated_paths_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "shared").mkdir()
    box = ServerSandbox(readable=(str(SERVERS),), writable=(str(tmp_path / "shared"),))
    params = sandbox_params("escape", _escape_server(), box)
    assert params.workspace == str(default_home_root() / "escape")
    own = ServerSandbox(home=str(default_home_root() / "escape"))
    assert sandbox_params("escape", _escape_server(), own).workspace == own.home


async def test_a_stdout_line_without_end_is_dropped_at_the_cap_not_buffered(
    sup: MCPSupervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio, "MAX_LINE_CHARS", 256 * 1024)
    await sup.add_server("escape", _escape_server(), _settings(tmp_path))
    assert await _call(sup, "junk", n=4 * 1024 * 1024) == "JUNKED"
    log = (tmp_path / "logs" / "escape.log").read_text()
    assert "dropped a stdout line longer than 262144 characters" in log
    assert "x" * 1000 not in log
    assert await _call(sup, "whoami")  # the server still works after the dropped line


@pytest.mark.parametrize("isolation", ["sandbox", "host"])
async def test_a_stderr_flood_stops_at_the_log_cap(
    sup: MCPSupervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    monkeypatch.setattr(stdio, "LOG_BYTES_PER_RUN", 256 * 1024)
    settings = _settings(tmp_path) if isolation == "sandbox" else ServerSettings()
    await sup.add_server("escape", _escape_server(), settings)
    assert await _call(sup, "spew", n=4 * 1024 * 1024) == "SPEWED"
    assert await _call(sup, "whoami")
    await sup.remove_server("escape")  # every line it wrote is in the log now
    size = (tmp_path / "logs" / "escape.log").stat().st_size
    assert size < 256 * 1024 + 4096
    assert "stderr beyond 262144 bytes dropped" in (tmp_path / "logs" / "escape.log").read_text()


class _Gone:
    pid = 1
    returncode = 1

    def kill_tree(self) -> None:
        pass


def test_the_stderr_tail_of_a_huge_log_reads_only_its_end(tmp_path: Path) -> None:
    log = tmp_path / "escape.log"
    with log.open("wb") as file:
        file.truncate(64 * 1024 * 1024)  # sparse: no disk used
        file.seek(0, os.SEEK_END)
        file.write(b"\nlast words\n")
    handle = StdioProcess(_Gone(), log_path=log, log_offset=0, sandboxed=True)
    tracemalloc.start()
    try:
        tail = handle.stderr_tail()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tail[-1] == "last words"
    assert peak < 1024 * 1024


async def test_stdout_noise_shares_the_log_cap(
    sup: MCPSupervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio, "LOG_BYTES_PER_RUN", 64 * 1024)
    await sup.add_server("escape", _escape_server(), _settings(tmp_path))
    assert await _call(sup, "noise", n=20000) == "NOISED"
    assert await _call(sup, "whoami")
    assert (tmp_path / "logs" / "escape.log").stat().st_size < 64 * 1024 + 4096


@pytest.mark.parametrize("name", ["SAGENTS_GATEWAY_TOKEN", "SAGENTS_DATA_DIR"])
def test_a_sandbox_may_not_pass_on_sagents_own_variables(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ServerSandbox(env=(name,))


@pytest.mark.parametrize("kind", ["readable", "writable"])
async def test_a_sandbox_may_not_show_a_log_dir_configured_elsewhere(
    tmp_path: Path, kind: str
) -> None:
    logs = tmp_path / "elsewhere" / "logs"  # outside the state dir that is protected anyway
    logs.mkdir(parents=True)
    (logs / "other.log").write_text("another server's stderr")
    async with MCPSupervisor(log_dir=logs) as supervisor:
        for path in (logs, logs.parent, logs / "other.log"):
            shown: dict[str, Any] = {"readable": (str(SERVERS),), "writable": ()}
            shown[kind] = (*shown[kind], str(path))
            settings = _settings(tmp_path, **shown)
            with pytest.raises(UpstreamUnavailableError) as caught:
                await supervisor.add_server("escape", _escape_server(), settings)
            assert str(logs) in str(caught.value)
    inside = logs / "data"  # a directory below it holds no log
    inside.mkdir()
    assert sandbox_params(
        "escape", _escape_server(), ServerSandbox(writable=(str(inside),)), log_dir=logs
    ).extra_rw_binds


@pytest.mark.parametrize("where", ["writable", "home", "readable"])
def test_a_python_caller_naming_its_config_file_gets_the_config_file_rule(
    tmp_path: Path, where: str
) -> None:
    config = tmp_path / "sagents.json"
    config.write_text("{}")
    value: Any = str(tmp_path) if where == "home" else (str(tmp_path),)
    box = replace(ServerSandbox(config_file=str(config)), **{where: value})
    with pytest.raises(SandboxError) as caught:
        sandbox_params("escape", _escape_server(), box)
    assert str(config) in str(caught.value)
    assert caught.value.details["where"] in {f"{where}.0", "home"}
    if where == "readable":  # a file without secrets may be shown read-only
        quiet = replace(box, config_has_secrets=False)
        assert sandbox_params("escape", _escape_server(), quiet).extra_ro_binds
