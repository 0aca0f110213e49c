"""History compression: over the budget, or when the model calls ``compress_history``, older
turns become one summary; calls stay paired, the todo list and loaded skills survive, the dropped
part is in the records, and a failed summary changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.agent import (
    AgentEvent,
    AgentSession,
    CompressionSettings,
    HistoryCompressedEvent,
    HistoryCompressEvent,
    SAgent,
)
from sagents.agent._compress import SUMMARY_PREFIX, message_tokens, split_history
from sagents.core._tokens import default_token_counter
from sagents.skill import SkillManager
from sagents.testing import ScriptedReply, http_error, reply, tool_call
from sagents.testing._scripted import ScriptedModel
from sagents.tool import SessionContext, ToolManager, ToolProxy, tool
from sagents.tool.impl import TodoStore, register_builtin_tools
from tests.agent.helpers import assert_settled_once, collect, done_of

pytestmark = pytest.mark.anyio

SKILL_BODY = "Always cite the page number of every fact."
TODO_TEXT = "write the quarterly report"
SUMMARY = "SUMMARY: the user wants the report; pages 1-6 were read."
BUDGET = 1200


@tool(permission="read_only")
def read_page(page: int) -> str:
    """Read one page of the document."""
    return f"page {page}: " + " ".join(f"word{page}x{i}" for i in range(120))


def _skills(root: Path) -> SkillManager:
    folder = root / "reports"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: reports\ndescription: Use to write reports.\n---\n{SKILL_BODY}\n",
        encoding="utf-8",
    )
    manager = SkillManager()
    manager.add_skill_dir(root)
    return manager


def _manager(tmp_path: Path) -> ToolManager:
    manager = ToolManager()
    manager.register_tool(read_page)
    register_builtin_tools(
        manager,
        None,
        names=["todo_write", "todo_read", "compress_history"],
        todo=TodoStore(path=tmp_path / "todo.sqlite3"),
    )
    return manager


def _is_summary_request(body: dict[str, Any]) -> bool:
    return "You compress a conversation" in str(body["messages"][0].get("content"))


class Script:
    """The main conversation's steps, with summary requests answered on the side."""

    def __init__(self, steps: list[ScriptedReply], summary: ScriptedReply) -> None:
        self.steps = steps
        self.summary = summary
        self.main: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        if _is_summary_request(body):
            self.summaries.append(body)
            return self.summary
        self.main.append(body)
        return self.steps[len(self.main) - 1]


def _steps() -> list[ScriptedReply]:
    todo = {"items": [{"id": "r", "content": TODO_TEXT}]}
    return [
        tool_call("load_skill", {"name": "reports"}, id="c_skill"),
        tool_call("todo_write", todo, id="c_todo"),
        *[tool_call("read_page", {"page": n}, id=f"c_page{n}") for n in range(1, 7)],
        reply("Here is the report."),
    ]


def _compressing_agent(model: ScriptedModel, records: Path, **chat_model: Any) -> SAgent:
    return SAgent(
        model=model.chat_model(**chat_model),
        run_script=False,
        max_history_tokens=BUDGET,
        compression=CompressionSettings(records_dir=records),
    )


async def _go(agent: SAgent, tmp_path: Path, session_id: str) -> list[Any]:
    """The events of one run of the task "go" with the document's tools, in auto mode."""
    return await collect(
        agent,
        [{"role": "user", "content": "go"}],
        tool_manager=_manager(tmp_path),
        session_context=SessionContext(session_id=session_id, permission_mode="auto"),
    )


def _request_tokens(body: dict[str, Any]) -> int:
    counter = default_token_counter()
    return sum(message_tokens(m, counter) for m in body["messages"])


async def test_over_the_budget_older_turns_become_one_summary_and_what_matters_survives(
    tmp_path: Path,
) -> None:
    script = Script(_steps(), reply(SUMMARY))
    records = tmp_path / "records"
    async with ScriptedModel(script) as model:
        agent = SAgent(
            model=model.chat_model(),
            system_prompt="You write reports.",
            run_script=False,
            max_history_tokens=BUDGET,
            compression=CompressionSettings(records_dir=records),
        )
        events = await collect(
            agent,
            [{"role": "user", "content": "write the report from the document"}],
            tool_manager=_manager(tmp_path),
            skill_manager=_skills(tmp_path / "skills"),
            session_context=SessionContext(session_id="s1", permission_mode="auto"),
        )
    done = done_of(events)
    assert done.reason == "stop"
    announced = [e for e in events if isinstance(e, HistoryCompressEvent)]
    finished = [e for e in events if isinstance(e, HistoryCompressedEvent)]
    assert announced
    assert len(announced) == len(finished) == len(script.summaries)
    assert all(e.ok for e in finished)
    assert events.index(announced[0]) < events.index(finished[0])
    assert announced[0].reason == "budget"
    assert announced[0].tokens_before > BUDGET
    assert announced[0].dropped > 0
    compressed = [b for b in script.main if SUMMARY_PREFIX in json.dumps(b["messages"])]
    assert compressed
    for body in compressed:
        messages = body["messages"]
        assert messages[0]["role"] == "system"
        task, summary = messages[1:3]
        # the user's own task survives verbatim, before the summary (never replaced by it)
        assert task == {"role": "user", "content": "write the report from the document"}
        assert summary["role"] == "user"
        assert summary["content"].startswith(SUMMARY_PREFIX)
        assert SUMMARY in summary["content"]
        assert SKILL_BODY in json.dumps(messages)  # the loaded skill is still there
        assert TODO_TEXT in json.dumps(messages)  # and the todo list
        assert_settled_once(messages[1:])
        assert _request_tokens(body) <= BUDGET
    record = Path(finished[0].record or "")
    assert record.parent == records
    saved = json.loads(await anyio.Path(record).read_text(encoding="utf-8"))
    assert saved["summary"] == SUMMARY
    dropped_ids = [m.get("tool_call_id") for m in saved["dropped"] if m["role"] == "tool"]
    assert "c_skill" in dropped_ids
    assert saved["dropped"][0]["content"] == "write the report from the document"
    assert_settled_once(done.messages)


async def test_a_failed_summary_leaves_the_history_untouched_and_says_so(tmp_path: Path) -> None:
    script = Script(_steps(), http_error(400, "summaries are broken today"))
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, tmp_path / "records", max_retries=0)
        events = await _go(agent, tmp_path, "s2")
    assert done_of(events).reason == "stop"
    finished = [e for e in events if isinstance(e, HistoryCompressedEvent)]
    assert finished
    assert not any(e.ok for e in finished)
    assert "summaries are broken today" in (finished[0].error or "")
    assert all(e.dropped == 0 for e in finished)
    assert not (tmp_path / "records").exists()
    last = script.main[-1]["messages"]
    assert SUMMARY_PREFIX not in json.dumps(last)
    assert last[0]["content"] == "go"  # every message is still there, from the first
    assert len(last) == 1 + 2 * 8


async def test_records_that_cannot_be_written_leave_the_history_untouched_and_say_so(
    tmp_path: Path,
) -> None:
    # a records folder that cannot be made (a file where it should be; a read-only or full
    # disk fails the same way): the run ended with internal_error ("a bug in sagents")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    script = Script(_steps(), reply(SUMMARY))
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, blocker / "records")
        events = await _go(agent, tmp_path, "s3")
    done = done_of(events)
    assert done.reason == "stop", done.error
    finished = [e for e in events if isinstance(e, HistoryCompressedEvent)]
    assert finished
    assert not any(e.ok for e in finished)
    assert str(blocker / "records") in (finished[0].error or "")
    last = script.main[-1]["messages"]
    assert SUMMARY_PREFIX not in json.dumps(last)  # nothing dropped without its record
    assert len(last) == 1 + 2 * 8


async def test_a_records_dir_given_as_a_string_is_a_folder(tmp_path: Path) -> None:
    script = Script(_steps(), reply(SUMMARY))
    records = tmp_path / "records"
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, str(records))  # type: ignore[arg-type]
        events = await _go(agent, tmp_path, "s4")
    assert done_of(events).reason == "stop"
    finished = [e for e in events if isinstance(e, HistoryCompressedEvent)]
    assert finished
    assert all(e.ok for e in finished)
    assert list(records.iterdir())


async def test_the_model_can_ask_for_compression_and_its_call_stays_paired(
    tmp_path: Path,
) -> None:
    steps = [
        *[tool_call("read_page", {"page": n}, id=f"c_page{n}") for n in range(1, 5)],
        tool_call("compress_history", {"focus": "page numbers"}, id="c_compress"),
        reply("done"),
    ]
    script = Script(steps, reply(SUMMARY))
    async with ScriptedModel(script) as model:
        agent = SAgent(
            model=model.chat_model(),
            run_script=False,
            compression=CompressionSettings(
                keep_recent_tokens=50, records_dir=tmp_path / "records"
            ),
        )
        events = await _go(agent, tmp_path, "s3")
    done = done_of(events)
    announced = [e for e in events if isinstance(e, HistoryCompressEvent)]
    assert [e.reason for e in announced] == ["requested"]
    assert "Keep in particular: page numbers" in script.summaries[0]["messages"][1]["content"]
    messages = script.main[-1]["messages"]
    assert messages[0] == {"role": "user", "content": "go"}  # the task, verbatim
    assert messages[1]["content"].startswith(SUMMARY_PREFIX)
    assert messages[2]["tool_calls"][0]["id"] == "c_compress"
    assert messages[3]["tool_call_id"] == "c_compress"
    assert "Compressed the history" in messages[3]["content"]
    assert_settled_once(messages)
    assert_settled_once(done.messages)


async def test_compress_history_outside_the_agent_loop_is_refused(tmp_path: Path) -> None:
    result = await _manager(tmp_path).run_tool("compress_history", {}, SessionContext())
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "agent loop" in result.text


def test_the_cut_never_separates_a_call_from_its_results() -> None:
    counter = default_token_counter()
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in range(3)
        ],
    }
    results = [{"role": "tool", "tool_call_id": f"c{i}", "content": "x " * 200} for i in range(3)]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        call,
    ]
    messages += [*results, {"role": "assistant", "content": "ok"}]
    for keep in range(0, 1000, 25):
        start, cut = split_history(messages, keep_tokens=keep, counter=counter)
        assert start == 1
        assert messages[cut]["role"] != "tool" if cut < len(messages) else True
        assert cut < len(messages)  # the last exchange is always kept


async def test_the_tools_a_suggestion_step_picked_survive_and_are_named(tmp_path: Path) -> None:
    script = Script(_steps()[2:], reply(SUMMARY))
    context = SessionContext(session_id="s4", permission_mode="auto")
    session = AgentSession(context, ToolProxy([_manager(tmp_path)]))
    session.audit_status["suggested_tools"] = ["read_page"]
    session.audit_status["tools_expanded"] = True
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, tmp_path / "records")
        events = await collect(
            agent, [{"role": "user", "content": "go"}], session_context=context, session=session
        )
    done = done_of(events)
    assert done.audit_status["suggested_tools"] == ["read_page"]
    compressed = [b for b in script.main if SUMMARY_PREFIX in json.dumps(b["messages"])]
    assert compressed
    assert compressed[0]["messages"][0] == {"role": "user", "content": "go"}
    summary = compressed[0]["messages"][1]["content"]
    assert "Tools picked for this session: read_page." in summary
    assert "expanded" in summary


async def test_a_dropped_load_skill_call_with_arguments_nested_100000_deep_is_compressed(
    tmp_path: Path,
) -> None:
    deep = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    steps = _steps()
    steps[0] = tool_call("load_skill", deep, id="c_skill")
    script = Script(steps, reply(SUMMARY))
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, tmp_path / "records")
        events = await collect(
            agent,
            [{"role": "user", "content": "write the report from the document"}],
            tool_manager=_manager(tmp_path),
            skill_manager=_skills(tmp_path / "skills"),
            session_context=SessionContext(session_id="s1", permission_mode="auto"),
        )
    done = done_of(events)
    assert done.reason == "stop", done.error
    finished = [e for e in events if isinstance(e, HistoryCompressedEvent)]
    assert finished
    assert all(e.ok for e in finished)
    assert_settled_once(done.messages)


class SummaryStalls(Script):
    """A script whose summary answer stalls mid-way; ``asked`` is set once it is asked for."""

    def __init__(self) -> None:
        super().__init__(
            _steps(), ScriptedReply(content="a summary that stalls " * 10, hang_after_chunks=8)
        )
        self.asked = anyio.Event()

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        answer = super().__call__(body)
        if self.summaries:
            self.asked.set()
        return answer


async def test_a_cancel_while_the_summary_is_read_ends_the_run_and_leaves_the_history(
    tmp_path: Path,
) -> None:
    # SAgent.cancel() from another task while the summariser's answer stalls: the run ends
    # cancelled, the history neither summarised nor left with an unanswered call
    script = SummaryStalls()
    async with ScriptedModel(script) as model:
        agent = _compressing_agent(model, tmp_path / "records")
        events: list[AgentEvent] = []
        async with anyio.create_task_group() as tg:

            async def cancel_once_asked() -> None:
                await script.asked.wait()
                agent.cancel()

            tg.start_soon(cancel_once_asked)
            events = await collect(
                agent,
                [{"role": "user", "content": "go"}],
                tool_manager=_manager(tmp_path),
                session_context=SessionContext(session_id="s9", permission_mode="auto"),
            )
    done = done_of(events)
    assert done.reason == "cancelled"
    assert not any(isinstance(e, HistoryCompressedEvent) and e.ok for e in events)
    assert SUMMARY_PREFIX not in json.dumps(done.messages)
    assert_settled_once(done.messages)
    assert not (tmp_path / "records").exists()
