"""An unknown key in the configuration names the closest known key (difflib)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagents.config import load_config
from sagents.config._loader import parse_config
from sagents.errors import ConfigError


@pytest.mark.parametrize(
    ("document", "key", "suggestion"),
    [
        (
            {"mcpServers": {"x": {"command": "a", "callTimout": 3}}},
            "mcpServers.x.callTimout",
            "callTimeout",
        ),
        (
            {"servers": {"x": {"command": "a", "conectTimeout": 3}}},
            "servers.x.conectTimeout",
            "connectTimeout",
        ),
        ({"scripts": {"maxCals": 3}}, "scripts.maxCals", "maxCalls"),
        (
            {"backgroundCalls": {"autoAfterSecs": 3}},
            "backgroundCalls.autoAfterSecs",
            "autoAfterSec",
        ),
        ({"skills": {"directory": ["a"]}}, "skills.directory", "directories"),
    ],
)
def test_a_misspelt_key_suggests_the_known_key(
    document: dict[str, Any], key: str, suggestion: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(document, file="cfg.json")
    error = caught.value
    assert error.details["key"] == key
    assert f"did you mean {suggestion!r}?" in str(error)
    assert error.hint is not None
    assert suggestion in error.hint


def test_an_unknown_key_with_nothing_close_lists_the_known_keys() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"x": {"command": "a", "zzzz": 1}}})
    assert "did you mean" not in str(caught.value)
    assert caught.value.hint is not None
    assert "callTimeout" in caught.value.hint


def test_load_config_names_the_file_the_key_and_the_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "x", "callTimout": 5}}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert str(path) in text
    assert "mcpServers.time.callTimout" in text
    assert "did you mean 'callTimeout'?" in text


@pytest.mark.parametrize(
    ("key", "where"),
    [("callTimeout", "mcpServers.<name>.callTimeout"), ("toolPermissions", None),
     ("pingInterval", None), ("apiKey", None)],
)  # fmt: skip
def test_a_server_entrys_key_at_the_top_level_is_named_in_a_warning(
    key: str, where: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Other clients' top-level keys are ignored on purpose; one of sagents' own server keys
    there is a mistake (it belongs in an entry), so it is named rather than dropped silently."""
    document = {"mcpServers": {"a": {"command": "x"}}, key: 3, "globalShortcut": "Ctrl+K"}
    with caplog.at_level("WARNING", logger="sagents.config"):
        config = parse_config(document, file="c.json")
    assert [s.name for s in config.servers] == ["a"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, warned  # not for the other client's key
    assert key in warned[0]
    assert "c.json" in warned[0]
    assert "ignored" in warned[0]
    assert (where or f"mcpServers.<name>.{key}") in warned[0]


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("mcpServer", "mcpServers"), ("mcpservers", "mcpServers"), ("Servers", "servers"),
     ("script", "scripts"), ("builtinTool", "builtinTools"), ("stores", "store"),
     ("profile", "profiles")],
)  # fmt: skip
def test_a_misspelt_top_level_key_is_refused_with_the_known_key(key: str, suggestion: str) -> None:
    """A typo of one of sagents' own top-level keys would otherwise be ignored as another
    client's key, and the file would load with nothing in it."""
    with pytest.raises(ConfigError) as caught:
        parse_config({key: {"time": {"command": "x"}}}, file="cfg.json")
    error = caught.value
    assert error.details["key"] == key
    assert f"did you mean {suggestion!r}?" in str(error)
    assert "cfg.json" in str(error)
    assert error.hint is not None
    assert "mcpServers" in error.hint


@pytest.mark.parametrize(
    "key", ["globalShortcut", "inputs", "preferences", "$schema", "mcp", "profiles"]
)
def test_another_clients_top_level_key_still_loads(key: str) -> None:
    config = parse_config({"mcpServers": {"a": {"command": "x"}}, key: {"x": 1}})
    assert [server.name for server in config.servers] == ["a"]
