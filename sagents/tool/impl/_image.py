"""``image_understanding``: read an image of the workspace and ask a vision model about it
(docs/builtin_tools.md).

The file is read through the sandbox's file API (the path rules of the file tools), decoded
with Pillow behind caps (bytes, then pixels read from the header before anything is decoded: a
decompression bomb never reaches memory), turned upright by its EXIF orientation, scaled down
to ``max_side``, and re-encoded without any metadata (EXIF, XMP, text chunks: a phone photo's
GPS position never leaves). The clean bytes go to the model as a ``data:`` URL in an
``image_url`` content part (OpenAI API reference, "Chat Completions", image inputs), with the
question; the model's answer is the result.

The model is any object with ``stream_turn(messages, tools)`` as ``sagents.agent``'s
``OpenAIChatModel`` has it (retries and clear errors included): a vision model that may differ
from the agent's own.
"""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

import anyio

from sagents.core._result import TextContent, ToolResult
from sagents.errors import (
    FileTooLargeError,
    FileToolError,
    InvalidImageError,
    ModelConfigError,
    ModelError,
)
from sagents.sandbox import Sandbox

__all__ = [
    "IMAGE_FORMATS",
    "ImageSettings",
    "ImageUnderstanding",
    "PreparedImage",
    "VisionModel",
    "prepare_image",
]

IMAGE_FORMATS: Final = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}
"""Pillow format names read, and the MIME type each is sent as."""

Detail = Literal["auto", "low", "high"]

_DEFAULT_QUESTION = "Describe this image in detail."
_ANSWER_PREVIEW_CHARS: Final = 200  # characters of an odd model answer quoted in an error


@runtime_checkable
class VisionModel(Protocol):
    """A chat model that takes images: ``sagents.agent.OpenAIChatModel`` is one.

    ``stream_turn`` yields text pieces, then one turn whose ``message`` is the assistant's
    message (OpenAI format).
    """

    @property
    def model(self) -> str:
        """The model's name."""
        ...

    def stream_turn(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
    ) -> AsyncIterator[Any]:
        """One model call."""
        ...


@dataclass(frozen=True, kw_only=True)
class ImageSettings:
    """Caps of ``image_understanding``.

    Attributes:
        max_bytes: Largest image file read (bytes).
        max_pixels: Largest image decoded (width x height, read from the header first).
        max_side: The longer side is scaled down to this many pixels before sending.
        jpeg_quality: Quality of re-encoded JPEG and WebP images (1-95).
        max_question_chars: Longest question accepted.
        system_prompt: The instructions sent with every question.
    """

    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    max_side: int = 2048
    jpeg_quality: int = 90
    max_question_chars: int = 8000
    system_prompt: str = (
        "You answer questions about one image. Say only what the image shows; say so when "
        "something cannot be seen or read."
    )

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_pixels", "max_side", "max_question_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"image setting {name!r} must be positive")
        if not 1 <= self.jpeg_quality <= 95:
            raise ValueError("image setting 'jpeg_quality' must be between 1 and 95")


@dataclass(frozen=True, kw_only=True)
class PreparedImage:
    """An image ready to send: clean bytes and what they are.

    Attributes:
        mime_type: ``image/png``, ``image/jpeg``, ``image/webp`` or ``image/gif``.
        data: The re-encoded image, without metadata.
        width / height: Its size in pixels, as sent.
        original_width / original_height: The file's size in pixels (upright).
        frames: Frames in the file (only the first of an animation is sent).
    """

    mime_type: str
    data: bytes
    width: int
    height: int
    original_width: int
    original_height: int
    frames: int = 1

    def data_url(self) -> str:
        """``data:<mime>;base64,<data>`` (RFC 2397)."""
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


def prepare_image(data: bytes, path: str, settings: ImageSettings) -> PreparedImage:
    """Decode, check, orient, shrink and re-encode ``data`` (CPU-bound: run it in a thread).

    Raises:
        InvalidImageError: not a PNG, JPEG, WebP or GIF; corrupt or truncated; more pixels
            than ``settings.max_pixels``.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        opened = Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS))
    except UnidentifiedImageError:
        raise InvalidImageError(
            f"{path!r} is not an image image_understanding reads (PNG, JPEG, WebP or GIF)",
            hint="convert it to PNG or JPEG first (for instance with execute_shell_command)",
            details={"path": path},
        ) from None
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise InvalidImageError(
            f"{path!r} cannot be read as an image: {error}", details={"path": path}
        ) from error
    with opened as image:
        width, height = image.size
        if width * height > settings.max_pixels:  # checked on the header, before decoding
            raise InvalidImageError(
                f"{path!r} is {width}x{height} pixels ({width * height:,}); the limit is "
                f"{settings.max_pixels:,}",
                hint="scale the image down first",
                details={"path": path, "width": width, "height": height},
            )
        fmt = str(image.format)
        frames = int(getattr(image, "n_frames", 1))
        try:
            image.seek(0)
            image.load()
            upright = ImageOps.exif_transpose(image)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
            raise InvalidImageError(
                f"{path!r} is a corrupt or truncated {fmt} image: {error}",
                hint="check the file; re-save or download it again",
                details={"path": path},
            ) from error
    original = upright.size
    if max(original) > settings.max_side:
        upright.thumbnail((settings.max_side, settings.max_side))
    upright.info = {}  # no EXIF, XMP, ICC or text chunk is written back
    options: dict[str, Any] = {}
    if fmt == "JPEG":
        if upright.mode not in ("RGB", "L"):
            upright = upright.convert("RGB")
        options = {"quality": settings.jpeg_quality}
    elif fmt == "WEBP":
        options = {"quality": settings.jpeg_quality}
    buffer = io.BytesIO()
    upright.save(buffer, format=fmt, **options)
    return PreparedImage(
        mime_type=IMAGE_FORMATS[fmt],
        data=buffer.getvalue(),
        width=upright.width,
        height=upright.height,
        original_width=original[0],
        original_height=original[1],
        frames=frames,
    )


def _answer_of(item: Any) -> str | None:
    message = getattr(item, "message", None)
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


class ImageUnderstanding:
    """The ``image_understanding`` tool: one image, one question, one model call.

    Args:
        model: The vision model (None: every call says that none is configured).
        settings: Caps (:class:`ImageSettings`).
    """

    def __init__(self, model: VisionModel | None, settings: ImageSettings | None = None) -> None:
        self.model = model
        self.settings = settings or ImageSettings()

    async def run(
        self, sandbox: Sandbox, *, path: str, question: str | None, detail: Detail = "auto"
    ) -> ToolResult:
        """Read ``path``, ask ``question`` about it, return the model's answer.

        Raises:
            ModelConfigError: no vision model is configured.
            FileMissingError, PathNotAllowedError, FileTooLargeError, InvalidImageError.
            ModelError: the model call failed (its subclasses say why).
        """
        model = self.model
        if model is None:
            raise ModelConfigError(
                "image_understanding has no vision model configured",
                hint="pass image_model=OpenAIChatModel(model=...) to register_builtin_tools, or "
                "set builtinTools.imageUnderstanding.model in the config",
            )
        settings = self.settings
        question = (question or "").strip() or _DEFAULT_QUESTION
        if len(question) > settings.max_question_chars:
            raise ValueError(
                f"the question has {len(question):,} characters; the limit is "
                f"{settings.max_question_chars:,}"
            )
        stat = await sandbox.stat(path)
        if stat.kind != "file":
            raise FileToolError(
                f"{path!r} is a {stat.kind}, not an image file", details={"path": path}
            )
        if stat.size > settings.max_bytes:
            raise FileTooLargeError(
                f"{path!r} has {stat.size:,} bytes; image_understanding reads at most "
                f"{settings.max_bytes:,}",
                hint="scale the image down or crop it first",
                details={"path": path},
            )
        data = await sandbox.read_file(path)
        if len(data) > settings.max_bytes:  # it grew after stat
            raise FileTooLargeError(
                f"{path!r} has more than {settings.max_bytes:,} bytes", details={"path": path}
            )
        image = await anyio.to_thread.run_sync(prepare_image, data, path, settings)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": settings.system_prompt},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": question},
                    {"type": "image_url", "image_url": {"url": image.data_url(), "detail": detail}},
                ],
            },
        ]
        answer: str | None = None
        async for item in model.stream_turn(messages):
            found = _answer_of(item)
            if found is not None:
                answer = found
        if not answer or not answer.strip():
            raise ModelError(
                f"the vision model {model.model!r} gave no answer about {path!r}",
                hint="check that the model accepts images (a vision-capable model)",
                details={"path": path, "answer": (answer or "")[:_ANSWER_PREVIEW_CHARS]},
            )
        structured = {
            "path": stat.path,
            "question": question,
            "answer": answer,
            "model": model.model,
            "mime_type": image.mime_type,
            "width": image.width,
            "height": image.height,
            "original_width": image.original_width,
            "original_height": image.original_height,
            "frames": image.frames,
            "bytes_sent": len(image.data),
        }
        return ToolResult(content=(TextContent(text=answer),), structured=structured)
