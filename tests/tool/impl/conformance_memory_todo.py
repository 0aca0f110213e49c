"""Checks shared by the in-process memory/todo tools and their MCP servers.

Each check takes a ``Call``: ``await call(tool, arguments, context) -> (structured, error code)``.
The in-process suite builds it on a ``ToolManager`` with the built-in tools; the MCP suite on a
``ToolManager`` with the server registered over stdio, where the server's identity (user,
agent, session) comes from its command line, so a context stands for one server process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Call = Callable[[str, dict[str, Any], Any], Awaitable[tuple[Any, str | None]]]

CORPUS = [
    "The user's favourite programming language is Rust.",
    "Deploys go out on Tuesdays after the standup.",
    "The staging database password rotates every month.",
    "Alice prefers answers in French.",
    "The cat is called Miso and likes tuna.",
]


async def check_fts_ranks_the_relevant_memory_first(call: Call, me: Any) -> None:
    for text in CORPUS:
        _, code = await call("memory_store", {"content": text}, me)
        assert code is None
    found, code = await call("memory_search", {"query": "which language does the user like"}, me)
    assert code is None
    assert found["memories"][0]["content"] == CORPUS[0]
    found, _ = await call("memory_search", {"query": "deploying on tuesday"}, me)
    assert found["memories"][0]["content"] == CORPUS[1]  # Porter stemming: deploying ~ deploys


async def check_dedup_within_a_scope(call: Call, me: Any) -> None:
    first, _ = await call("memory_store", {"content": "Likes  green tea", "tags": ["drink"]}, me)
    again, _ = await call("memory_store", {"content": "likes green TEA", "tags": ["pref"]}, me)
    assert first["duplicate"] is False
    assert again["duplicate"] is True
    assert again["memory"]["id"] == first["memory"]["id"]
    assert again["memory"]["tags"] == ["drink", "pref"]
    found, _ = await call("memory_search", {"query": "green tea"}, me)
    assert len(found["memories"]) == 1


async def check_users_never_see_each_other(call: Call, alice: Any, bob: Any) -> None:
    stored, _ = await call("memory_store", {"content": "Alice's secret is 42"}, alice)
    same, _ = await call("memory_store", {"content": "Alice's secret is 42"}, bob)
    assert same["duplicate"] is False  # never deduplicated across users
    found, _ = await call("memory_search", {"query": "secret"}, bob)
    assert [m["id"] for m in found["memories"]] == [same["memory"]["id"]]
    _, code = await call("memory_delete", {"id": stored["memory"]["id"]}, bob)
    assert code == "invalid_arguments"
    found, _ = await call("memory_search", {"query": "secret"}, alice)
    assert [m["id"] for m in found["memories"]] == [stored["memory"]["id"]]


async def check_delete(call: Call, me: Any) -> None:
    stored, _ = await call("memory_store", {"content": "temporary note"}, me)
    deleted, code = await call("memory_delete", {"id": stored["memory"]["id"]}, me)
    assert code is None
    assert deleted["deleted"]["content"] == "temporary note"
    found, _ = await call("memory_search", {"query": "temporary note"}, me)
    assert found["memories"] == []
    _, code = await call("memory_delete", {"id": stored["memory"]["id"]}, me)
    assert code == "invalid_arguments"


async def check_todo_cycles_and_unknown_ids_are_refused(call: Call, me: Any) -> None:
    items = [
        {"id": "a", "content": "design"},
        {"id": "b", "content": "build", "blocked_by": ["a"]},
    ]
    result, code = await call("todo_write", {"items": items, "mode": "replace"}, me)
    assert code is None
    assert [i["id"] for i in result["items"]] == ["a", "b"]
    _, code = await call("todo_write", {"items": [{"id": "a", "blocked_by": ["b"]}]}, me)
    assert code == "invalid_arguments"
    _, code = await call(
        "todo_write", {"items": [{"id": "c", "content": "x", "blocked_by": ["z"]}]}, me
    )
    assert code == "invalid_arguments"
    _, code = await call("todo_write", {"items": [{"id": "a", "blocked_by": ["a"]}]}, me)
    assert code == "invalid_arguments"
    listed, _ = await call("todo_read", {}, me)
    assert listed["items"] == result["items"]  # nothing changed


async def check_todo_update_changes_only_given_fields(call: Call, me: Any) -> None:
    await call("todo_write", {"items": [{"id": "a", "content": "design"}], "mode": "replace"}, me)
    result, _ = await call("todo_write", {"items": [{"id": "a", "status": "done"}]}, me)
    assert result["items"][0]["content"] == "design"
    assert result["items"][0]["status"] == "done"
    result, _ = await call("todo_write", {"items": [{"content": "ship"}]}, me)
    assert [i["id"] for i in result["items"]] == ["a", "t1"]


CJK_CORPUS = [
    "用户喜欢喝绿茶，不喝咖啡。",  # Chinese
    "部署在每周二站会之后进行。",  # Chinese
    "ユーザーは東京に住んでいて、猫を飼っている。",  # Japanese
    "사용자는 한국어로 답변을 받기를 원합니다.",  # Korean
    "The cat is called Miso and likes tuna.",
]


async def check_cjk_queries_of_one_two_and_more_characters(call: Call, me: Any) -> None:
    """Chinese, Japanese and Korean text is found by queries of 1, 2 and 4+ characters
    (full-text tokenizers keep a run of such characters as one token)."""
    for text in CJK_CORPUS:
        _, code = await call("memory_store", {"content": text}, me)
        assert code is None

    async def contents(query: str) -> list[str]:
        found, code = await call("memory_search", {"query": query}, me)
        assert code is None, query
        return [m["content"] for m in found["memories"]]

    tea, deploy, tokyo, korean, miso = CJK_CORPUS
    for query, expected in [
        ("茶", [tea]), ("猫", [tokyo]), ("한", [korean]),  # one character
        ("绿茶", [tea]), ("東京", [tokyo]), ("한국", [korean]),  # two
        ("每周二站会", [deploy]), ("猫を飼っている", [tokyo]), ("한국어로 답변을", [korean]),  # 4+
        ("北京", []),  # in no memory
    ]:  # fmt: skip
        assert await contents(query) == expected, query
    assert sorted(await contents("Miso 猫")) == sorted([tokyo, miso])  # words and runs: any
    found = await contents("咖啡 部署 会议")  # the memory with more of the runs comes first
    assert found[0] in (tea, deploy)
    assert set(found) == {tea, deploy}
    tagged, _ = await call("memory_store", {"content": "notes", "tags": ["日本語"]}, me)
    assert tagged["duplicate"] is False
    assert await contents("日本") == ["notes"]  # tags are searched too
