"""``builtinTools.webFetch``: parsed into WebFetchSettings arguments; bad values name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagents.config import load_config
from sagents.errors import ConfigError
from sagents.tool.impl import WebFetchSettings


def _write(tmp_path: Path, section: object) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {}, "builtinTools": section}))
    return path


def test_web_fetch_section_becomes_settings(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            {
                "enabled": ["web_fetch"],
                "webFetch": {
                    "allowNetworks": ["10.1.0.0/16"],
                    "denyDomains": ["evil.test"],
                    "maxRedirects": 2,
                    "timeoutSec": 5,
                },
            },
        )
    )
    settings = WebFetchSettings(**config.web_fetch)
    assert settings.allow_networks == ("10.1.0.0/16",)
    assert settings.deny_domains == ("evil.test",)
    assert settings.max_redirects == 2
    assert settings.timeout_seconds == 5
    assert settings.max_bytes == WebFetchSettings().max_bytes  # unset keys keep the defaults


def test_no_section_means_default_settings(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, {"enabled": []}))
    assert WebFetchSettings(**config.web_fetch) == WebFetchSettings()


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"allowNetworks": ["not-a-network"]}, "allowNetworks"),
        ({"maxRedirects": -1}, "maxRedirects"),
        ({"allowLoopback": True}, "allowLoopback"),
    ],
)
def test_bad_web_fetch_values_name_the_key(tmp_path: Path, section: object, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, {"webFetch": section}))
    assert key in str(caught.value) or key in str(caught.value.details)
