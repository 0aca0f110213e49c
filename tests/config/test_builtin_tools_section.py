"""``builtinTools.webFetch`` and ``builtinTools.imageUnderstanding``: typed settings, with the
tools' own defaults for what the file leaves unset; bad values name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagents.config import ImageUnderstandingSettings, load_config
from sagents.errors import ConfigError
from sagents.tool.impl import ImageSettings, WebFetchSettings


def _write(tmp_path: Path, section: object) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {}, "builtinTools": section}))
    return path


def _error(tmp_path: Path, section: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, section))
    return caught.value


def test_web_fetch_section_becomes_settings(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            {
                "enabled": ["web_fetch"],
                "webFetch": {
                    "allowNetworks": ["10.1.0.0/16"],
                    "allowHosts": ["intranet.example"],
                    "allowDomains": ["example.org"],
                    "denyDomains": ["evil.test"],
                    "maxRedirects": 2,
                    "maxBytes": 1000,
                    "timeoutSec": 5,
                    "seenUrlsOnly": True,
                },
            },
        )
    )
    assert config.web_fetch == WebFetchSettings(
        allow_networks=("10.1.0.0/16",),
        allow_hosts=("intranet.example",),
        allow_domains=("example.org",),
        deny_domains=("evil.test",),
        max_redirects=2,
        max_bytes=1000,
        timeout_seconds=5,
        seen_urls_only=True,
    )


def test_unset_web_fetch_keys_keep_the_tool_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, {"webFetch": {"maxRedirects": 0}}))
    assert config.web_fetch.max_redirects == 0  # 0 is a value, not "unset"
    assert config.web_fetch.max_bytes == WebFetchSettings().max_bytes
    assert config.web_fetch.timeout_seconds == WebFetchSettings().timeout_seconds
    assert config.web_fetch.seen_urls_only is WebFetchSettings().seen_urls_only


def test_no_section_means_default_settings(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, {"enabled": []}))
    assert config.web_fetch == WebFetchSettings()
    assert config.image_understanding == ImageUnderstandingSettings()


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"allowNetworks": ["not-a-network"]}, "builtinTools.webFetch.allowNetworks"),
        ({"allowHosts": "intranet.example"}, "builtinTools.webFetch.allowHosts"),  # type
        ({"maxRedirects": "many"}, "builtinTools.webFetch.maxRedirects"),  # type
        ({"maxRedirects": -1}, "builtinTools.webFetch.maxRedirects"),  # range
        ({"maxRedirects": 21}, "builtinTools.webFetch.maxRedirects"),  # range
        ({"maxBytes": 0}, "builtinTools.webFetch.maxBytes"),  # range
        ({"timeoutSec": 0}, "builtinTools.webFetch.timeoutSec"),  # range
        ({"allowLoopback": True}, "builtinTools.webFetch.allowLoopback"),  # unknown
        ({"max_bytes": 10}, "builtinTools.webFetch.max_bytes"),  # another spelling
    ],
)
def test_bad_web_fetch_values_name_the_key(tmp_path: Path, section: object, key: str) -> None:
    error = _error(tmp_path, {"webFetch": section})
    assert error.details["key"] == key


def test_image_understanding_section_becomes_settings(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            {
                "enabled": ["image_understanding"],
                "imageUnderstanding": {
                    "model": "vision-1",
                    "baseUrl": "http://127.0.0.1:9/v1",
                    "apiKeyEnv": "VISION_KEY",
                    "maxBytes": 1000,
                    "maxPixels": 2000,
                    "maxSide": 300,
                },
            },
        )
    )
    assert config.image_understanding == ImageUnderstandingSettings(
        model="vision-1",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="VISION_KEY",
        caps=ImageSettings(max_bytes=1000, max_pixels=2000, max_side=300),
    )


def test_unset_image_understanding_keys_keep_the_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, {"imageUnderstanding": {"maxSide": 512}}))
    section = config.image_understanding
    assert (section.model, section.base_url) == (None, None)  # $SAGENTS_MODEL, $OPENAI_BASE_URL
    assert section.api_key_env == "OPENAI_API_KEY"
    assert section.caps == ImageSettings(max_side=512)


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"model": 5}, "builtinTools.imageUnderstanding.model"),  # type
        ({"maxSide": "big"}, "builtinTools.imageUnderstanding.maxSide"),  # type
        ({"maxPixels": 0}, "builtinTools.imageUnderstanding.maxPixels"),  # range
        ({"maxBytes": -1}, "builtinTools.imageUnderstanding.maxBytes"),  # range
        ({"apiKeyEnv": ""}, "builtinTools.imageUnderstanding.apiKeyEnv"),  # range
        ({"apiKey": "sk-1"}, "builtinTools.imageUnderstanding.apiKey"),  # unknown
        ({"base_url": "http://x"}, "builtinTools.imageUnderstanding.base_url"),  # spelling
    ],
)
def test_bad_image_understanding_values_name_the_key(
    tmp_path: Path, section: object, key: str
) -> None:
    error = _error(tmp_path, {"imageUnderstanding": section})
    assert error.details["key"] == key
