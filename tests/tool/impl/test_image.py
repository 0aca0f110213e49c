"""``image_understanding``: a workspace image and a question reach a vision model as a data URL."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from PIL import Image

from sagents.core._result import ToolResult
from sagents.sandbox import Sandbox, create_sandbox
from sagents.testing import ScriptedModel, reply
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import ImageSettings, VisionModel, register_builtin_tools, single_sandbox

pytestmark = pytest.mark.anyio

_CONTEXT = SessionContext(session_id="s1")


def _image_bytes(fmt: str, size: tuple[int, int] = (40, 30), **save: Any) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format=fmt, **save)
    return buffer.getvalue()


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with create_sandbox("memory", workspace="/nowhere") as box:
        yield box


def _manager(
    sandbox: Sandbox, model: VisionModel | None, settings: ImageSettings | None = None
) -> ToolManager:
    manager = ToolManager()
    register_builtin_tools(
        manager,
        single_sandbox(sandbox),
        names=["image_understanding"],
        image_model=model,
        image=settings,
    )
    return manager


def _image_part(request: dict[str, Any]) -> tuple[str, str]:
    """``(question, data URL)`` of the request's user message."""
    user = request["messages"][-1]
    assert user["role"] == "user"
    text = next(p["text"] for p in user["content"] if p["type"] == "text")
    url = next(p["image_url"]["url"] for p in user["content"] if p["type"] == "image_url")
    return text, url


def _code(result: ToolResult) -> str | None:
    assert result.is_error, result.text
    assert result.error is not None
    return result.error.code


@pytest.mark.parametrize(("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg")])
async def test_a_workspace_image_reaches_the_model_as_a_data_url_of_its_type(
    sandbox: Sandbox, fmt: str, mime: str
) -> None:
    await sandbox.mkdir("pics")
    await sandbox.write_file("pics/red.img", _image_bytes(fmt))
    async with ScriptedModel([reply("A red rectangle.")]) as model:
        manager = _manager(sandbox, model.chat_model(model="vision-model"))
        result = await manager.run_tool(
            "image_understanding", {"path": "pics/red.img", "question": "What colour?"}, _CONTEXT
        )
    assert not result.is_error, result.text
    assert result.text == "A red rectangle."
    assert result.structured["mime_type"] == mime
    [request] = model.requests
    assert request["model"] == "vision-model"
    question, url = _image_part(request)
    assert question == "What colour?"
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix)
    sent = Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :])))
    assert sent.format == fmt
    assert sent.size == (40, 30)


async def test_exif_metadata_is_stripped_and_the_orientation_applied(sandbox: Sandbox) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90° clockwise to display
    exif[0x010F] = "PhoneMaker"  # Make
    await sandbox.write_file("photo.jpg", _image_bytes("JPEG", (40, 30), exif=exif.tobytes()))
    async with ScriptedModel([reply("ok")]) as model:
        manager = _manager(sandbox, model.chat_model())
        result = await manager.run_tool("image_understanding", {"path": "photo.jpg"}, _CONTEXT)
    assert not result.is_error, result.text
    _question, url = _image_part(model.requests[0])
    data = base64.b64decode(url.split(",", 1)[1])
    sent = Image.open(io.BytesIO(data))
    assert sent.size == (30, 40)  # upright
    assert not sent.getexif()
    assert b"PhoneMaker" not in data


async def test_a_large_image_is_scaled_down_before_sending(sandbox: Sandbox) -> None:
    await sandbox.write_file("big.png", _image_bytes("PNG", (800, 200)))
    async with ScriptedModel([reply("wide")]) as model:
        manager = _manager(sandbox, model.chat_model(), ImageSettings(max_side=100))
        result = await manager.run_tool("image_understanding", {"path": "big.png"}, _CONTEXT)
    assert (result.structured["width"], result.structured["height"]) == (100, 25)
    assert (result.structured["original_width"], result.structured["original_height"]) == (
        800,
        200,
    )


def _png_header_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels, with a tiny compressed body."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\0" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [7_000, 100_000])
async def test_a_decompression_bomb_is_refused_from_its_header(sandbox: Sandbox, side: int) -> None:
    await sandbox.write_file("bomb.png", _png_header_claiming(side, side))
    manager = _manager(sandbox, _NeverCalled())
    result = await manager.run_tool("image_understanding", {"path": "bomb.png"}, _CONTEXT)
    assert _code(result) == "invalid_image"
    assert "'bomb.png'" in result.text
    assert "limit" in result.text


async def test_an_oversized_file_is_refused_before_it_is_read(sandbox: Sandbox) -> None:
    await sandbox.write_file("huge.png", _image_bytes("PNG", (200, 200)))
    manager = _manager(sandbox, _NeverCalled(), ImageSettings(max_bytes=100))
    result = await manager.run_tool("image_understanding", {"path": "huge.png"}, _CONTEXT)
    assert _code(result) == "file_too_large"
    assert "'huge.png'" in result.text


async def test_a_corrupt_image_is_a_clear_error(sandbox: Sandbox) -> None:
    await sandbox.write_file("cut.png", _image_bytes("PNG", (300, 300))[:200])
    manager = _manager(sandbox, _NeverCalled())
    result = await manager.run_tool("image_understanding", {"path": "cut.png"}, _CONTEXT)
    assert _code(result) == "invalid_image"
    assert "'cut.png'" in result.text


async def test_a_file_that_is_not_an_image_is_a_clear_error(sandbox: Sandbox) -> None:
    await sandbox.write_file("notes.txt", b"just text, not pixels\n")
    manager = _manager(sandbox, _NeverCalled())
    result = await manager.run_tool("image_understanding", {"path": "notes.txt"}, _CONTEXT)
    assert _code(result) == "invalid_image"
    assert "PNG, JPEG, WebP or GIF" in result.text


async def test_a_path_outside_the_workspace_is_refused(sandbox: Sandbox) -> None:
    manager = _manager(sandbox, _NeverCalled())
    result = await manager.run_tool("image_understanding", {"path": "../etc/x.png"}, _CONTEXT)
    assert _code(result) == "path_not_allowed"


async def test_a_missing_file_says_so(sandbox: Sandbox) -> None:
    manager = _manager(sandbox, _NeverCalled())
    result = await manager.run_tool("image_understanding", {"path": "nope.png"}, _CONTEXT)
    assert _code(result) == "file_not_found"


async def test_without_a_vision_model_the_tool_says_what_to_configure(sandbox: Sandbox) -> None:
    await sandbox.write_file("a.png", _image_bytes("PNG"))
    manager = _manager(sandbox, None)
    result = await manager.run_tool("image_understanding", {"path": "a.png"}, _CONTEXT)
    assert _code(result) == "model_not_configured"
    assert result.error is not None
    assert "image_model" in (result.error.hint or "")


async def test_a_model_failure_is_an_error_result(sandbox: Sandbox) -> None:
    await sandbox.write_file("a.gif", _image_bytes("GIF"))
    async with ScriptedModel([reply("")]) as model:
        manager = _manager(sandbox, model.chat_model(max_retries=0))
        result = await manager.run_tool("image_understanding", {"path": "a.gif"}, _CONTEXT)
    assert _code(result) == "model_error"
    assert _image_part(model.requests[0])[1].startswith("data:image/gif;base64,")


class _NeverCalled:
    """A vision model that fails the test if it is asked anything."""

    model = "never"

    def stream_turn(self, messages: Any, tools: Any = ()) -> AsyncIterator[Any]:
        raise AssertionError("the model must not be called")
