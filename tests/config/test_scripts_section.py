"""The ``scripts`` section: both concurrency spellings, the output cap, bad values."""

from __future__ import annotations

import pytest

from sagents.config import parse_config
from sagents.errors import ConfigError


def test_max_concurrency_is_the_run_script_spelling_of_max_parallel() -> None:
    assert parse_config({"scripts": {"maxConcurrency": 7}}).scripts.max_parallel == 7
    assert parse_config({"scripts": {"maxParallel": 5}}).scripts.max_parallel == 5


def test_max_output_bytes_is_read_with_a_default() -> None:
    assert parse_config({"scripts": {"maxOutputBytes": 1234}}).scripts.max_output_bytes == 1234
    assert parse_config({}).scripts.max_output_bytes == 32 * 1024 * 1024


def test_a_non_positive_output_cap_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"scripts\.maxOutputBytes"):
        parse_config({"scripts": {"maxOutputBytes": 0}})
