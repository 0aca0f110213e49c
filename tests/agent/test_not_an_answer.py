"""A whole answer that is not the API's answer (a web page such as a proxy's login, JSON of
another shape) is a ``model_error`` that shows what came and names the variable to check, on
the adapters whose SDK hands such a body back as it is: never ``internal_error`` (a bug in
sagents), never taken as an answer (docs/agent.md, "OpenAIChatModel")."""

from __future__ import annotations

import anyio
import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, WireReply
from tests.agent.helpers import RUN_TIMEOUT_S

pytestmark = pytest.mark.anyio

BODIES = {
    "a web page": ("text/html", "<html><body>Sign in to the proxy</body></html>"),
    "JSON of another shape": ("application/json", '{"hello": "world"}'),
    "a JSON list": ("application/json", "[1, 2]"),
    # the containers of each API's answer, empty, without its end (status, stop_reason)
    "an empty shell": ("application/json", '{"choices": [], "output": [], "content": []}'),
}
VARIABLES = {
    "chat": "OPENAI_BASE_URL",
    "responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
}


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("api", list(VARIABLES))
async def test_a_whole_answer_that_is_not_the_apis_answer_is_a_clear_model_error(
    api: str, body: str
) -> None:
    content_type, text = BODIES[body]
    wire = WireReply(headers={"content-type": content_type}, body=(text,))
    async with ScriptedModel([wire], api=api) as model:  # type: ignore[arg-type]
        agent = SAgent(model=model.chat_model(stream=False, max_retries=0), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            result = await agent.run([{"role": "user", "content": "go"}])
        endpoint = model.base_url.removesuffix("/v1")
    assert result.reason == "error"
    assert result.error is not None
    assert result.error["code"] == "model_error", result.error
    assert endpoint in result.error["message"]
    if body == "a web page":
        assert "Sign in to the proxy" in result.error["message"]
    if body not in ("JSON of another shape", "an empty shell"):  # one without choices, for chat
        assert VARIABLES[api] in result.error["hint"]
    assert [m["role"] for m in result.messages] == ["user"]  # nothing of it kept
