"""Shared fixtures. Async tests run on asyncio through the anyio pytest plugin.

The whole session writes its data (audit store, script runtime, MCP server logs) under a
temporary directory, never into the user's home.
"""

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _isolated_data_dirs() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in ("SAGENTS_DATA_DIR", "XDG_STATE_HOME")}
    with tempfile.TemporaryDirectory(prefix="sagents-tests-") as root:
        os.environ["SAGENTS_DATA_DIR"] = os.path.join(root, "data")
        os.environ["XDG_STATE_HOME"] = os.path.join(root, "state")
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
