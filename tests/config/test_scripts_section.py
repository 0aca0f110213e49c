"""The ``scripts`` section: one shape (the older ``maxParallel`` read with a warning), the output
cap, bad values, and the one runtime value it becomes."""

from __future__ import annotations

from typing import Any

import pytest

from sagents.config import parse_config
from sagents.config._models import ScriptsParams as ConfigScriptsParams
from sagents.core._limits import ScriptLimits
from sagents.errors import ConfigError
from sagents.script import ScriptsParams


def test_the_scripts_block_becomes_the_limits_the_runner_uses() -> None:
    limits = parse_config(
        {"scripts": {"maxCalls": 10, "maxConcurrency": 7, "timeoutSec": 5, "maxOutputBytes": 99}}
    ).scripts
    assert limits == ScriptLimits(max_calls=10, max_concurrency=7, timeout_s=5, max_output_bytes=99)
    assert parse_config({}).scripts == ScriptLimits()


def test_max_parallel_is_read_as_max_concurrency_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert parse_config({"scripts": {"maxParallel": 5}}).scripts.max_concurrency == 5
    assert "rename it to scripts.maxConcurrency" in caplog.text


def test_both_concurrency_spellings_at_once_are_refused() -> None:
    with pytest.raises(ConfigError, match="maxConcurrency' only"):
        parse_config({"scripts": {"maxParallel": 5, "maxConcurrency": 6}})


def test_a_snake_case_key_is_refused_and_named() -> None:
    with pytest.raises(ConfigError, match=r"scripts\.max_parallel"):
        parse_config({"scripts": {"max_parallel": 5}})


def test_the_script_packages_scripts_params_is_the_config_models_one() -> None:
    assert ScriptsParams is ConfigScriptsParams


def test_max_output_bytes_is_read_with_a_default() -> None:
    assert parse_config({"scripts": {"maxOutputBytes": 1234}}).scripts.max_output_bytes == 1234
    assert parse_config({}).scripts.max_output_bytes == 32 * 1024 * 1024


def test_a_non_positive_output_cap_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"scripts\.maxOutputBytes"):
        parse_config({"scripts": {"maxOutputBytes": 0}})


def test_the_config_defaults_are_the_limits_defaults_and_both_refuse_zero_calls() -> None:
    assert ConfigScriptsParams().to_limits() == ScriptLimits()
    with pytest.raises(ValueError, match="max_calls"):
        ScriptLimits(max_calls=0)


@pytest.mark.parametrize(
    ("key", "field", "value"),
    [
        (key, field, value)
        for key, field in [
            ("maxCalls", "max_calls"),
            ("maxConcurrency", "max_concurrency"),
            ("timeoutSec", "timeout_s"),
            ("maxOutputBytes", "max_output_bytes"),
        ]
        for value in (-1, 0, 1)
    ],
)
def test_the_config_and_the_limits_refuse_the_same_values(key: str, field: str, value: int) -> None:
    """The bounds are written twice (the config's name the key); they must agree."""
    given: dict[str, Any] = {field: value}
    try:
        ScriptLimits(**given)
    except ValueError:
        with pytest.raises(ConfigError) as caught:
            parse_config({"scripts": {key: value}})
        assert caught.value.details["key"] == f"scripts.{key}"
    else:
        assert getattr(parse_config({"scripts": {key: value}}).scripts, field) == value
