"""``cache``: results of read-only tools kept ``ttlSec`` seconds, per tool, arguments and
principal, at most ``maxEntries`` (docs/gateway.md, "Result cache"). The age is read from a
clock the test moves: no sleeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagents.config import load_config
from sagents.config._cache import CacheSettings, ResultCache
from sagents.config.tools import build_tool_manager
from sagents.errors import ConfigError
from sagents.tool import SessionContext, ToolManager, tool
from tests.config.middleware_helpers import Clock, as_principal

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool(name="notes__read", permission="read_only")
async def read_notes(topic: str, depth: int = 1) -> str:
    """Read the notes on a topic."""
    RAN.append(f"read {topic}")
    return f"notes on {topic} #{len(RAN)}"


@tool(name="notes__write", permission="write")
async def write_notes(topic: str) -> str:
    """Write a note."""
    RAN.append(f"write {topic}")
    return f"wrote {topic} #{len(RAN)}"


@tool(name="notes__flaky", permission="read_only")
async def flaky(topic: str) -> str:
    """Fails every time."""
    RAN.append(f"flaky {topic}")
    raise RuntimeError("the notes service is down")


def _manager(clock: Clock, *, ttl_s: float = 60, max_entries: int = 100) -> ToolManager:
    manager: ToolManager

    def permission_of(name: str) -> str:
        return manager.get_tool_spec(name).permission

    cache = ResultCache(
        CacheSettings(ttl_s=ttl_s, max_entries=max_entries),
        permission_of=permission_of,
        clock=clock,
    )
    manager = ToolManager(middleware=[cache])
    for each in (read_notes, write_notes, flaky):
        manager.register_tool(each)
    return manager


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def _text(manager: ToolManager, name: str, args: dict[str, Any], who: str) -> str:
    result = await manager.run_tool(name, args, as_principal(who))
    return result.text


async def test_a_read_only_result_is_served_until_its_ttl_is_over() -> None:
    clock = Clock()
    manager = _manager(clock, ttl_s=60)
    first = await _text(manager, "notes__read", {"topic": "dns", "depth": 2}, "alice")
    clock.now += 59.9
    # the same arguments in another order are the same call
    again = await _text(manager, "notes__read", {"depth": 2, "topic": "dns"}, "alice")
    assert again == first == "notes on dns #1"
    assert RAN == ["read dns"]
    assert await _text(manager, "notes__read", {"topic": "dns"}, "alice") == "notes on dns #2"
    clock.now += 0.1  # 60 s after the first call: expired, the tool runs again
    assert await _text(manager, "notes__read", {"topic": "dns", "depth": 2}, "alice") == (
        "notes on dns #3"
    )
    clock.now += 30  # a hit does not renew the age of what it served
    assert await _text(manager, "notes__read", {"topic": "dns", "depth": 2}, "alice") == (
        "notes on dns #3"
    )
    assert len(RAN) == 3


async def test_one_principals_result_is_never_served_to_another() -> None:
    manager = _manager(Clock())
    assert await _text(manager, "notes__read", {"topic": "dns"}, "alice") == "notes on dns #1"
    assert await _text(manager, "notes__read", {"topic": "dns"}, "bob") == "notes on dns #2"
    anonymous = SessionContext(session_id="principal alice")  # no principal: its own session
    assert (await manager.run_tool("notes__read", {"topic": "dns"}, anonymous)).text == (
        "notes on dns #3"
    )
    assert (await manager.run_tool("notes__read", {"topic": "dns"}, anonymous)).text == (
        "notes on dns #3"
    )
    other = SessionContext(session_id="another")
    assert (await manager.run_tool("notes__read", {"topic": "dns"}, other)).text == (
        "notes on dns #4"
    )
    assert await _text(manager, "notes__read", {"topic": "dns"}, "alice") == "notes on dns #1"


async def test_write_tools_and_errors_are_never_cached() -> None:
    manager = _manager(Clock())
    assert await _text(manager, "notes__write", {"topic": "a"}, "alice") == "wrote a #1"
    assert await _text(manager, "notes__write", {"topic": "a"}, "alice") == "wrote a #2"
    for _ in range(2):
        failed = await manager.run_tool("notes__flaky", {"topic": "a"}, as_principal("alice"))
        assert failed.is_error
    assert RAN == ["write a", "write a", "flaky a", "flaky a"]


async def test_the_cache_keeps_at_most_max_entries_least_recently_used_going_first() -> None:
    clock = Clock()
    manager = _manager(clock, max_entries=2)
    await _text(manager, "notes__read", {"topic": "a"}, "alice")
    await _text(manager, "notes__read", {"topic": "b"}, "alice")
    await _text(manager, "notes__read", {"topic": "a"}, "alice")  # a hit: a is the newest now
    await _text(manager, "notes__read", {"topic": "c"}, "alice")  # b goes
    assert RAN == ["read a", "read b", "read c"]
    await _text(manager, "notes__read", {"topic": "a"}, "alice")
    await _text(manager, "notes__read", {"topic": "c"}, "alice")
    assert RAN == ["read a", "read b", "read c"]
    await _text(manager, "notes__read", {"topic": "b"}, "alice")
    assert RAN == ["read a", "read b", "read c", "read b"]


async def test_the_cache_from_the_config_answers_after_the_hooks(tmp_path: Path) -> None:
    hook = tmp_path / "deny.py"
    hook.write_text(
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "print(json.dumps({'decision': 'deny' if call['arguments']['topic'] == 'secret'"
        " else 'allow', 'reason': 'not that topic'}))\n"
    )
    path = tmp_path / "sagents.json"
    config = {
        "mcpServers": {},
        "cache": {"ttlSec": 300, "maxEntries": 10},
        "hooks": {"preToolUse": [{"command": ["python3", str(hook)], "timeoutSec": 60}]},
    }
    path.write_text(json.dumps(config))
    loaded = load_config(path)
    assert loaded.cache == CacheSettings(ttl_s=300, max_entries=10)
    async with await build_tool_manager(loaded) as manager:
        manager.register_tool(read_notes)
        assert await _text(manager, "notes__read", {"topic": "dns"}, "alice") == ("notes on dns #1")
        assert await _text(manager, "notes__read", {"topic": "dns"}, "alice") == ("notes on dns #1")
        refused = await manager.run_tool("notes__read", {"topic": "secret"}, as_principal("alice"))
    assert RAN == ["read dns"]
    assert refused.error is not None
    assert refused.error.message == "not that topic"


@pytest.mark.parametrize(
    "cache",
    [
        {},
        {"ttlSec": 0},
        {"ttlSec": "60"},
        {"ttlSec": 60, "maxEntries": 0},
        {"ttlSec": 60, "maxEntries": "10"},
        {"ttlSec": 60, "ttl": 5},
        [{"ttlSec": 60}],
    ],
)
def test_a_bad_cache_is_a_clear_config_error(tmp_path: Path, cache: Any) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "cache": cache}))
    with pytest.raises(ConfigError, match="cache"):
        load_config(path)


async def test_a_tool_no_longer_read_only_is_not_served_from_the_cache() -> None:
    permissions = {"notes__read": "read_only"}
    cache = ResultCache(
        CacheSettings(ttl_s=60), permission_of=permissions.__getitem__, clock=Clock()
    )
    manager = ToolManager(middleware=[cache])
    manager.register_tool(read_notes)
    assert await _text(manager, "notes__read", {"topic": "a"}, "alice") == "notes on a #1"
    assert await _text(manager, "notes__read", {"topic": "a"}, "alice") == "notes on a #1"
    permissions["notes__read"] = "ask"  # e.g. its pinned definition changed
    assert await _text(manager, "notes__read", {"topic": "a"}, "alice") == "notes on a #2"
    assert len(cache) == 1
