"""Shared fixtures. Async tests run on asyncio through the anyio pytest plugin."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
