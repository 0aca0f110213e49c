"""The selectors that ask the provider: one model call (LLMToolSelector) and the /embeddings
endpoint (EmbeddingsToolSelector), each falling back to the offline ranking."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from openai import AsyncOpenAI

from sagents.agent import (
    EmbeddingsToolSelector,
    LLMToolSelector,
    OfflineToolSelector,
    ToolSelector,
    suggest_tools,
)
from sagents.agent._ranking import split_words
from sagents.agent._selectors import parse_tool_names
from sagents.testing import ScriptedModel, http_error, reply
from tests.agent.test_suggest import WORKSPACE, spec

pytestmark = pytest.mark.anyio

WAIT_S = 30.0
QUERY = "email bob the quarterly report"


def test_every_selector_is_a_tool_selector() -> None:
    assert isinstance(OfflineToolSelector(), ToolSelector)
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    assert isinstance(EmbeddingsToolSelector(client, "m"), ToolSelector)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('["a", "b"]', ["a", "b"]),
        ('```json\n["a"]\n```', ["a"]),
        ('The tools: ["a", " b "].', ["a", "b"]),
        ('{"tools": ["a"]}', ["a"]),
        ("[]", []),
        ("use the email tool", None),
        ("[1, 2]", None),
        ('["a", ', None),
        ("[" * 100_000 + "]" * 100_000, None),
        ("The tools: " + "[" * 100_000, None),
        ("[" * 50_000 + '"a"' + "]" * 50_000, None),
    ],
)
def test_a_selector_answer_is_read_as_a_json_list_of_names(
    text: str, names: list[str] | None
) -> None:
    assert parse_tool_names(text) == names


async def test_the_llm_selector_keeps_the_models_order_and_drops_unknown_names() -> None:
    answer = '["mail__send_email", "delete_everything", "fs__list_directory", "mail__send_email"]'
    async with ScriptedModel([reply(answer)]) as model:
        selector = LLMToolSelector(model.chat_model(stream=False))
        with anyio.fail_after(WAIT_S):
            chosen = await selector.select(QUERY, WORKSPACE, 5)
        assert chosen == ["mail__send_email", "fs__list_directory"]
        (request,) = model.requests
    assert "tools" not in request  # one plain call, no tool schemas
    system, user = request["messages"]
    assert "at most 5 tool names" in system["content"]
    assert QUERY in user["content"]
    for item in WORKSPACE:
        assert f"- {item.name}: {item.summary}" in user["content"]


async def test_the_llm_selector_returns_at_most_k_names() -> None:
    names = json.dumps([s.name for s in WORKSPACE])
    async with ScriptedModel([reply(names)]) as model:
        with anyio.fail_after(WAIT_S):
            chosen = await LLMToolSelector(model.chat_model()).select(QUERY, WORKSPACE, 2)
    assert chosen == [WORKSPACE[0].name, WORKSPACE[1].name]


@pytest.mark.parametrize(
    "answer",
    [
        reply("I would use the email tool for this."),  # not a list
        reply('["send_mail", "email"]'),  # only unknown names
        http_error(401, "bad key"),  # the call fails
    ],
    ids=["garbage", "unknown-names", "http-401"],
)
async def test_a_bad_selector_answer_falls_back_to_the_offline_ranking(answer: Any) -> None:
    async with ScriptedModel([answer]) as model:
        selector = LLMToolSelector(model.chat_model(max_retries=0))
        with anyio.fail_after(WAIT_S):
            chosen = await selector.select(QUERY, WORKSPACE, 3)
    assert chosen == suggest_tools(QUERY, WORKSPACE, 3)
    assert chosen[0] == "mail__send_email"


async def test_an_empty_list_means_no_tool_is_needed() -> None:
    async with ScriptedModel([reply("[]")]) as model:
        with anyio.fail_after(WAIT_S):
            assert await LLMToolSelector(model.chat_model()).select("hi", WORKSPACE, 3) == []


async def test_the_llm_chooses_among_the_offline_rankings_best_when_there_are_many() -> None:
    tools = [*WORKSPACE, *(spec(f"filler_{i}", f"Filler tool number {i}.") for i in range(40))]
    async with ScriptedModel([reply('["mail__send_email"]')]) as model:
        selector = LLMToolSelector(model.chat_model(), max_candidates=5)
        with anyio.fail_after(WAIT_S):
            assert await selector.select(QUERY, tools, 3) == ["mail__send_email"]
        lines = model.requests[0]["messages"][1]["content"].splitlines()
    assert len([line for line in lines if line.startswith("- ")]) == 5
    assert any(line.startswith("- mail__send_email:") for line in lines)


async def test_the_llm_selector_asks_nothing_for_no_tools_or_k_zero() -> None:
    async with ScriptedModel([]) as model:
        selector = LLMToolSelector(model.chat_model())
        assert await selector.select(QUERY, [], 3) == []
        assert await selector.select(QUERY, WORKSPACE, 0) == []
        assert model.requests == []


# -- the embeddings endpoint -------------------------------------------------------------------

DIMENSIONS = 64


def _vector(text: str) -> list[float]:
    """A deterministic bag-of-words vector: hashed word counts."""
    vector = [0.0] * DIMENSIONS
    for word in split_words(text):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    return vector


class FakeEmbeddings:
    """An OpenAI-compatible /embeddings endpoint in memory."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.inputs: list[list[str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/embeddings")
        if self.fail:
            return httpx.Response(503, json={"error": {"message": "down"}})
        body = json.loads(request.content)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.inputs.append(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(t)}
            for i, t in enumerate(texts)
        ]
        data.reverse()  # the index, not the order, says which text a vector belongs to
        return httpx.Response(
            200,
            json={
                "object": "list",
                "model": body["model"],
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def client(self) -> AsyncOpenAI:
        transport = httpx.MockTransport(self.handle)
        return AsyncOpenAI(
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=transport),
        )


async def test_the_embeddings_selector_ranks_by_the_endpoints_vectors() -> None:
    endpoint = FakeEmbeddings()
    selector = EmbeddingsToolSelector(endpoint.client(), "embed-small", lexical=False)
    with anyio.fail_after(WAIT_S):
        assert (await selector.select("forecast for a city", WORKSPACE, 2))[0] == (
            "weather__get_forecast"
        )
        assert (await selector.select("send email", WORKSPACE, 1)) == ["mail__send_email"]
    tool_batch, *queries = endpoint.inputs
    assert len(tool_batch) == len(WORKSPACE)  # the tools' vectors are computed once
    assert queries == [["forecast for a city"], ["send email"]]
    assert not math.isnan(sum(_vector("x")))


async def test_the_embeddings_selector_fuses_bm25_by_default() -> None:
    endpoint = FakeEmbeddings()
    selector = EmbeddingsToolSelector(endpoint.client(), "embed-small")
    with anyio.fail_after(WAIT_S):
        assert (await selector.select("erase old.log please", WORKSPACE, 1)) != []
        assert (await selector.select(QUERY, WORKSPACE, 1)) == ["mail__send_email"]


async def test_a_failing_embeddings_endpoint_falls_back_to_the_offline_ranking() -> None:
    selector = EmbeddingsToolSelector(FakeEmbeddings(fail=True).client(), "embed-small")
    with anyio.fail_after(WAIT_S):
        chosen = await selector.select(QUERY, WORKSPACE, 3)
    assert chosen == suggest_tools(QUERY, WORKSPACE, 3)
