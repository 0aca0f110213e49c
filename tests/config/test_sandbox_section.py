"""The top-level ``sandbox`` section: typed (``provider``), unknown keys refused like every
other section's."""

from __future__ import annotations

import pytest

from sagents.config import SandboxSettings, parse_config
from sagents.errors import ConfigError


def test_sandbox_section_becomes_settings() -> None:
    config = parse_config({"mcpServers": {}, "sandbox": {"provider": "bwrap"}})
    assert config.sandbox == SandboxSettings(provider="bwrap")
    assert config.sandbox.provider == "bwrap"


def test_no_sandbox_section_means_no_provider() -> None:
    assert parse_config({"mcpServers": {}}).sandbox == SandboxSettings(provider=None)


@pytest.mark.parametrize(
    ("section", "key", "message"),
    [
        ({"provider": 5}, "sandbox.provider", "string"),  # type
        ({"provider": ""}, "sandbox.provider", "at least 1"),  # range
        ("bwrap", "sandbox", "must be a JSON object, not a string"),  # type
        ({"provider": "bwrap", "extra": {"k": 1}}, "sandbox.extra", "unknown key 'extra'"),
        ({"providr": "bwrap"}, "sandbox.providr", "did you mean 'provider'"),
    ],
)
def test_bad_sandbox_sections_name_the_key(section: object, key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {}, "sandbox": section}, file="servers.json")
    assert caught.value.details["key"] == key
    assert caught.value.details["file"] == "servers.json"
    assert message in str(caught.value)


def test_a_servers_sandbox_keys_at_the_top_level_point_to_the_servers_entry() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {}, "sandbox": {"readable": ["/srv"]}})
    assert caught.value.details["key"] == "sandbox.readable"
    assert "mcpServers.<name>.sandbox" in str(caught.value.hint)
