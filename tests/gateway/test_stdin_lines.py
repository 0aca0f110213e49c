"""The gateway's stdin reader: a line without end must not grow memory without bound."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sagents.gateway._stdin_lines import MAX_LINE_BYTES, OVERLONG_LINE, BoundedLines


async def _lines(data: bytes, max_bytes: int) -> list[str]:
    out = []
    with anyio.fail_after(10):
        async for line in BoundedLines(io.BytesIO(data), max_bytes=max_bytes):
            out.append(line)
    return out


@pytest.mark.anyio
async def test_lines_are_read_whole_up_to_the_cap() -> None:
    assert await _lines(b'{"a": 1}\n{"b": "\xc3\xa9"}\nlast', 16) == [
        '{"a": 1}\n', '{"b": "é"}\n', "last",
    ]  # fmt: skip


@pytest.mark.anyio
async def test_an_overlong_line_is_dropped_and_the_next_line_still_arrives() -> None:
    data = b"x" * 10_000 + b"\n" + b'{"ok": true}\n'
    assert await _lines(data, 100) == [OVERLONG_LINE, '{"ok": true}\n']


@pytest.mark.anyio
async def test_an_endless_line_without_newline_ends_as_one_overlong_line() -> None:
    assert await _lines(b"\0" * 1_000_000, 1000) == [OVERLONG_LINE]


@pytest.mark.anyio
async def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert await _lines(b"\xff\xfe\n", 100) == ["\ufffd\ufffd\n"]


def test_a_cap_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        BoundedLines(io.BytesIO(b""), max_bytes=0)


def test_sagents_serve_survives_an_overlong_line_and_answers_the_next_request(
    tmp_path: Path,
) -> None:
    config = tmp_path / "empty.json"
    config.write_text('{"mcpServers": {}}')
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }  # fmt: skip
    data = b"x" * (MAX_LINE_BYTES + 10) + b"\n" + json.dumps(initialize).encode() + b"\n"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "sagents"), "serve", "--config", str(config)],
        input=data,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data")},
    )
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert any(r.get("id") == 1 and "result" in r for r in replies), done.stderr[-2000:]
