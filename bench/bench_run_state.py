"""A paused run's ``RunState`` (docs/agent.md, "Pausing and resuming"): its size, and the time
to sign, check, save and load it on the embedded store (SQLite) and on PostgreSQL. Not a test:
prints figures and ratios measured in one run.

The typical state: a conversation of 10 turns (user, assistant with a reasoning part and its
signature and two tool calls, two tool results of ~1,500 characters each), paused on an answer
with one held write call and one held questionnaire, one call of that answer already run.

1. Size: bytes of ``to_json()``, and its ratio to the bare history as OpenAI dicts (JSON).
2. Sign + check: ``to_json()`` then ``RunState.from_json()`` (HMAC-SHA256 both ways), against
   ``json.dumps``/``json.loads`` of the same document (the baseline).
3. Store: ``save_state`` + ``load_state`` + ``claim_state`` of the state, against the same three
   calls with an empty document (``{}``) in the same store: the cost of the state's size.

The PostgreSQL server is started from Debian's binaries on a temporary directory, as the tests
do (tests/postgres_server.py), unless ``--store URL`` names one.

Usage: ``.venv/bin/python bench/bench_run_state.py [--repeats 200] [--store postgresql://...]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sagents.agent import (  # noqa: E402  # noqa: E402
    Interruption,
    Message,
    ReasoningPart,
    RunState,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.store import AgentStore, open_store, parse_store_url  # noqa: E402
from sagents.tool.questions import Question  # noqa: E402
from tests.postgres_server import bench_database  # noqa: E402

TURNS = 10
RESULT_CHARS = 1500
KEY = b"bench-key-of-at-least-thirty-two-characters"


def typical_state() -> RunState:
    history: list[Message] = []
    for turn in range(TURNS):
        history.append(Message(role="user", parts=(TextPart(text=f"step {turn}: do the thing"),)))
        calls = tuple(
            ToolCall(id=f"call_{turn}_{n}", name="fleet__get_device_status", arguments='{"id": 7}')
            for n in range(2)
        )
        history.append(
            Message(
                role="assistant",
                parts=(
                    ReasoningPart(text="I should check both devices. " * 4, signature="S" * 300),
                    TextPart(text="Checking."),
                    *calls,
                ),
            )
        )
        history.extend(
            Message(
                role="tool",
                parts=(
                    ToolResultPart(tool_call_id=c.id, content="status ok; " * (RESULT_CHARS // 11)),
                ),
            )
            for c in calls
        )
    history.append(
        Message(
            role="assistant",
            parts=(
                ToolCall(id="c_run", name="lookup", arguments='{"key": "a"}'),
                ToolCall(id="c_save", name="save", arguments='{"path": "report.txt"}'),
                ToolCall(id="c_ask", name="questionnaire", arguments="{}"),
            ),
        )
    )
    pending = [
        Interruption(
            id="c_save",
            kind="approval",
            tool_name="save",
            arguments={"path": "report.txt"},
            permission="write",
            offered=("allow_once", "allow_session", "deny"),
        ),
        Interruption(
            id="c_ask",
            kind="questionnaire",
            tool_name="questionnaire",
            title="Trip",
            questions=(
                Question(id="city", kind="single_choice", prompt="Where?", options=("a", "b")),
            ),
        ),
    ]
    return RunState(
        agent="agent",
        session_id="s1",
        history=history,
        pending=pending,
        settled={"c_run": "value of a"},
        turns=TURNS + 1,
        usage={"prompt_tokens": 52_000, "completion_tokens": 3_100},
        audit_status={"suggested_tools": ["lookup", "save"], "tools_expanded": False},
        offered_tools=["lookup", "save", "questionnaire"],
    )


def _median_ms(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def _median_ms_async(work: Callable[[], Awaitable[object]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def _round_trip(store: AgentStore, document: str) -> None:
    state_id = uuid.uuid4().hex
    await store.save_state(state_id, "s1", document)
    await store.load_state(state_id)
    await store.claim_state(state_id)


async def main(repeats: int, url: str | None) -> None:
    state = typical_state()
    text = state.to_json(key=KEY)
    document = state.to_document()
    bare = json.dumps([m.to_openai() for m in state.history])
    print(
        f"state: {len(text):,} bytes of JSON; the bare history {len(bare):,} bytes "
        f"(ratio {len(text) / len(bare):.2f})"
    )
    sign = _median_ms(lambda: RunState.from_json(state.to_json(key=KEY), key=KEY), repeats)
    plain = _median_ms(lambda: json.loads(json.dumps(document)), repeats)
    print(
        f"to_json + from_json: {sign:.3f} ms; json dumps + loads {plain:.3f} ms "
        f"(ratio {sign / plain:.2f})"
    )
    with (
        tempfile.TemporaryDirectory(prefix="sagents-bench-state-") as tmp,
        bench_database(url) as pg,
    ):
        root = Path(tmp)
        async with (
            open_store(parse_store_url(None), data_dir=root) as sqlite,
            open_store(parse_store_url(pg), data_dir=root) as postgres,
        ):
            for name, store in (("sqlite", sqlite.agents), ("postgresql", postgres.agents)):
                await _round_trip(store, "{}")  # the file, the schema, the pool: warmed
                empty = await _median_ms_async(lambda s=store: _round_trip(s, "{}"), repeats)
                full = await _median_ms_async(lambda s=store: _round_trip(s, text), repeats)
                print(
                    f"{name}: save + load + claim {full:.2f} ms; with an empty document "
                    f"{empty:.2f} ms (ratio {full / empty:.2f})"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--store", default=None, help="a postgresql:// URL to use")
    arguments = parser.parse_args()
    os.environ.setdefault("SAGENTS_STATE_KEY", KEY.decode())
    anyio.run(main, arguments.repeats, arguments.store)
