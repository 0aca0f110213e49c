"""A refusal of a request as longer than the model's context, in the words each real server
uses (``tests/agent/wire/``, each file citing where its body comes from), is
``context_length_exceeded`` on every adapter: with automatic compression on, the history is
compressed and the request sent once more (docs/agent.md, "History compression"); a 5xx that
says so is not retried as if transient."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagents.agent import CompressionSettings, HistoryCompressEvent, SAgent
from sagents.testing import ScriptedModel, load_wire, reply
from sagents.tool import SessionContext
from tests.agent.helpers import collect, done_of
from tests.agent.test_conformance import HISTORY
from tests.agent.test_servers import Tools

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
REFUSALS = [
    ("chat", "llama_cpp_server_context_size_400"),
    ("chat", "llama_cpp_server_context_size_500"),
    ("chat", "vllm_prompt_longer_than_max_model_len"),
    ("chat", "litellm_anthropic_context_window_exceeded"),
    ("chat", "llama_cpp_python_context_length"),
    ("anthropic", "anthropic_input_and_max_tokens_exceed_context_limit"),
]


@pytest.mark.parametrize(("api", "name"), REFUSALS, ids=[name for _api, name in REFUSALS])
async def test_a_servers_context_refusal_is_compressed_and_sent_once_more(
    api: str, name: str, tmp_path: Path
) -> None:
    script = [*load_wire(WIRE / f"{name}.json"), reply("SUMMARY"), reply("the write-up")]
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(max_retries=2, max_retry_wait=0.01),
            run_script=False,
            max_history_tokens=100_000,
            compression=CompressionSettings(records_dir=tmp_path),
        )
        events = await collect(
            agent,
            HISTORY,
            tool_manager=Tools().manager(),
            session_context=SessionContext(permission_mode="auto"),
        )
    done = done_of(events)
    assert done.reason == "stop", done.error
    assert [e.reason for e in events if isinstance(e, HistoryCompressEvent)] == ["context_length"]
    assert len(server.requests) == 3  # refused, the summary, sent once more: never retried
    assert done.messages[-1]["content"] == "the write-up"
    users = [m["content"] for m in done.messages if m["role"] == "user"]
    assert users[:2] == ["the task: summarise the logs", "also count the errors"]


@pytest.mark.parametrize(("api", "name"), REFUSALS, ids=[name for _api, name in REFUSALS])
async def test_a_servers_context_refusal_without_compression_is_one_clear_error(
    api: str, name: str
) -> None:
    script = [*load_wire(WIRE / f"{name}.json"), reply("never")]
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(max_retries=2, max_retry_wait=0.01), run_script=False
        )
        done = done_of(await collect(agent, HISTORY, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "context_length_exceeded"
    assert "try again later" not in str(done.error.get("hint"))
    assert len(server.requests) == 1
