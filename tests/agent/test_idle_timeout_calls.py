"""The idle timeout of streamed answers through real SDK clients (docs/agent.md, "The model
seam"): after a retry within one call, and with two answers of one adapter at once (each call
its own timer). Bounded waits only: the stalls end at the idle timeout, which is what each
test checks."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from sagents.agent import (
    AnthropicModel,
    Finish,
    GeminiModel,
    Message,
    MessageDeltaEvent,
    ModelRequest,
    OpenAIChatModel,
    OpenAIResponsesModel,
    SAgent,
    TextPart,
)
from sagents.errors import ModelTimeoutError
from sagents.testing import ScriptedModel, ScriptedReply, http_error, reply
from sagents.tool import ToolManager
from tests.agent.helpers import RUN_TIMEOUT_S, finish_of
from tests.agent.helpers import model_events as call
from tests.agent.test_gemini import USER_MESSAGE

pytestmark = pytest.mark.anyio

APIS = ("chat", "responses", "anthropic", "gemini")
IDLE_S = 1.0
# The idle timeout of a call whose whole answer must come within it too: generous, as a loaded
# machine can hold a live answer past a second; a stall still ends at it.
ANSWER_IDLE_S = 5.0
REQUEST = ModelRequest(messages=(USER_MESSAGE,))
USER = [{"role": "user", "content": "go"}]


@pytest.mark.parametrize("api", APIS)
async def test_a_stall_after_a_retry_ends_at_the_idle_timeout(api: str) -> None:
    script = [
        http_error(503, "busy", retry_after=0),
        reply("a long answer that stalls", hang_after_chunks=2),
    ]
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model(timeout=IDLE_S, max_retries=1)
        with anyio.fail_after(RUN_TIMEOUT_S), pytest.raises(ModelTimeoutError) as raised:
            await call(model, REQUEST)
    assert raised.value.details == {"limit": "timeout", "seconds": IDLE_S}
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_one_adapter_s_stalled_answer_times_out_while_its_other_answer_ends(
    api: str,
) -> None:
    def script(body: dict[str, Any]) -> ScriptedReply:
        stalls = "stall" in str(body)
        return reply(
            "stall then nothing" if stalls else "a whole answer",
            hang_after_chunks=(2 if stalls else None),
        )

    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model(timeout=ANSWER_IDLE_S, max_retries=0)
        stalled: list[BaseException] = []
        answered: list[Finish] = []

        async def stalling() -> None:
            request = ModelRequest(
                messages=(Message(role="user", parts=(TextPart(text="stall"),)),)
            )
            try:
                await call(model, request)
            except ModelTimeoutError as error:
                stalled.append(error)

        async def answering() -> None:
            answered.append(finish_of(await call(model, REQUEST)))

        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stalling)
                tg.start_soon(answering)
    assert len(stalled) == 1
    assert answered[0].response.message.text == "a whole answer"


@pytest.mark.parametrize("api", APIS)
async def test_a_run_left_mid_answer_cancels_nothing_of_the_consumer_s_later_work(api: str) -> None:
    # the consumer stops at the first piece of a long answer and closes the run; its task then
    # works past the idle timeout the answer's timer was set for: nothing cancels it
    long = reply("a long answer in many pieces " * 20)
    async with ScriptedModel([long], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(timeout=IDLE_S / 4), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=ToolManager())) as run:
                async for event in run:
                    if isinstance(event, MessageDeltaEvent):
                        break
            later = anyio.Event()
            asyncio.get_running_loop().call_later(IDLE_S, later.set)  # past the timer's ring
            await later.wait()
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


@pytest.mark.parametrize("api", APIS)
async def test_a_retry_wait_that_would_pass_the_deadline_ends_the_call_at_once(api: str) -> None:
    # the server asks for a wait the call accepts (max_retry_wait) but its deadline does not
    script = [http_error(503, "busy", retry_after=30), reply("never")]
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model(deadline=5.0, max_retry_wait=60.0, max_retries=2)
        with anyio.fail_after(RUN_TIMEOUT_S), pytest.raises(ModelTimeoutError) as raised:
            await call(model, REQUEST)
    assert raised.value.details == {"limit": "deadline", "seconds": 5.0}
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_an_adapter_called_on_trio_says_it_runs_on_asyncio(api: str) -> None:
    # docs/architecture.md, "Event loops": the agent loop and its model adapters run on asyncio
    async def on_trio() -> None:
        model = {
            "chat": OpenAIChatModel,
            "responses": OpenAIResponsesModel,
            "anthropic": AnthropicModel,
            "gemini": GeminiModel,
        }[api]("m", api_key="k", base_url="http://127.0.0.1:9")
        await call(model, REQUEST)

    with pytest.raises(RuntimeError, match="run on asyncio"):
        anyio.run(on_trio, backend="trio")
