"""Offline token counting and character-safe cuts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sagents.core._tokens import (
    OFFLINE_ENCODING,
    EstimateCounter,
    TiktokenCounter,
    default_token_counter,
    estimate_tokens,
)

SAMPLES = {
    "english": "The quick brown fox jumps over the lazy dog. " * 40,
    "chinese": "人工智能是计算机科学的一个分支，它企图了解智能的实质。" * 20,
    "code": "def f(x: int) -> int:\n    return [i * x for i in range(10)][-1]\n" * 30,
    "json": '{"id": 123, "name": "device-7", "temp": 21.5, "ok": true}, ' * 40,
    "emoji": "ok 👍🏽 fine 🎉 " * 50,
}


def test_the_default_counter_is_the_offline_tiktoken_encoding() -> None:
    counter = default_token_counter()
    assert isinstance(counter, TiktokenCounter)
    assert counter.name == OFFLINE_ENCODING
    assert counter.count("hello world") == 2


def test_counting_works_without_home_and_without_a_cache_directory(
    tmp_path: os.PathLike[str],
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    env["TIKTOKEN_CACHE_DIR"] = os.path.join(os.fspath(tmp_path), "empty")
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # any download would fail
    code = (
        "from sagents.core._tokens import default_token_counter as d; c = d(); "
        "print(c.name, c.count('hello world'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [OFFLINE_ENCODING, "2"]


def test_special_token_text_is_counted_as_plain_text() -> None:
    assert default_token_counter().count("<|endoftext|>") > 1


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_estimate_never_undercounts_the_samples(name: str) -> None:
    text = SAMPLES[name]
    assert estimate_tokens(text) >= default_token_counter().count(text)


@pytest.mark.parametrize(
    "counter", [default_token_counter(), EstimateCounter()], ids=["tiktoken", "estimate"]
)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_head_and_tail_are_exact_pieces_within_the_budget(
    counter: TiktokenCounter | EstimateCounter, name: str
) -> None:
    text = SAMPLES[name]
    head = counter.head(text, 25)
    tail = counter.tail(text, 25)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert 0 < counter.count(head) <= 26  # re-encoding a cut piece may differ by one token
    assert 0 < counter.count(tail) <= 26


def test_cuts_never_split_a_multi_byte_character() -> None:
    counter = default_token_counter()
    text = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢" * 100  # characters of four UTF-8 bytes, several tokens each
    for budget in range(1, 12):
        head = counter.head(text, budget)
        tail = counter.tail(text, budget)
        assert text.startswith(head)
        assert text.endswith(tail)
        head.encode("utf-8")  # a lone surrogate or a replacement would show here
        assert "\ufffd" not in head + tail


def test_a_text_that_fits_is_returned_whole() -> None:
    counter = default_token_counter()
    assert counter.head("short text", 100) == "short text"
    assert counter.tail("short text", 100) == "short text"


@pytest.mark.parametrize("limit", [1, 10, 100, 1000])
def test_exceeds_agrees_with_count(limit: int) -> None:
    counter = default_token_counter()
    for text in SAMPLES.values():
        assert counter.exceeds(text, limit) == (counter.count(text) > limit)
