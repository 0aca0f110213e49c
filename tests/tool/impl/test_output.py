"""The output follower: byte-offset reads, and the tail-comparing fallback with a fake provider."""

from __future__ import annotations

import pytest

from sagents.tool.impl._output import OutputFollower, tail_delta

pytestmark = pytest.mark.anyio


class FakeTailProvider:
    """A provider that only returns the last ``max_bytes`` bytes of a log it is fed."""

    def __init__(self) -> None:
        self.log = b""

    async def read_background_output_tail(self, task_id: str, max_bytes: int) -> tuple[str, int]:
        tail = self.log[-max_bytes:]
        return tail.decode(errors="ignore"), len(self.log)


class FakeRangeProvider:
    def __init__(self, log: bytes) -> None:
        self.log = log

    async def read_background_output_range(
        self, task_id: str, offset: int, max_bytes: int
    ) -> tuple[str, int]:
        data = self.log[offset : offset + max_bytes]
        return data.decode(), offset + len(data)


def test_tail_delta_returns_what_follows_the_previous_tails_suffix() -> None:
    assert tail_delta("hello wor", "lo world\n") == "ld\n"


def test_tail_delta_with_a_short_log_returns_the_appended_text() -> None:
    assert tail_delta("abc", "abcdef") == "def"


def test_tail_delta_of_an_unchanged_tail_is_empty() -> None:
    assert tail_delta("same tail", "same tail") == ""


def test_tail_delta_before_any_read_is_the_whole_tail() -> None:
    assert tail_delta("", "first") == "first"


def test_tail_delta_without_overlap_marks_the_gap() -> None:
    delta = tail_delta("aaaa", "bbbb")
    assert delta.endswith("bbbb")
    assert "output skipped" in delta


def test_tail_delta_uses_the_growth_to_resolve_periodic_output() -> None:
    # window 4: "abab" then the log grew by "ab" -> the tail is "abab" again
    assert tail_delta("abab", "abab") == ""
    assert tail_delta("abab", "abab", grown_bytes=2) == "ab"
    assert tail_delta("abab", "abab", grown_bytes=4) == "abab"


def test_tail_delta_counts_growth_in_utf8_bytes() -> None:
    assert tail_delta("xé", "xéé", grown_bytes=2) == "é"


@pytest.mark.parametrize("window", [4, 5, 7, 16])
async def test_tail_follower_reassembles_the_log_without_duplicate_or_loss(window: int) -> None:
    provider = FakeTailProvider()
    follower = OutputFollower(provider, "t", chunk_bytes=window)
    assert not follower.uses_ranges
    seen = []
    pieces = ["ab", "ab", "c", "abab", "", "xyz", "ab"]
    for piece in pieces:
        provider.log += piece.encode()
        seen.append(await follower.read_new())
    assert "".join(seen) == "".join(pieces)


async def test_tail_follower_says_when_the_log_outgrew_one_tail() -> None:
    provider = FakeTailProvider()
    follower = OutputFollower(provider, "t", chunk_bytes=4)
    provider.log = b"ab"
    assert await follower.read_new() == "ab"
    provider.log += b"abababab"
    delta = await follower.read_new()
    assert "output skipped" in delta
    assert delta.endswith("abab")


async def test_range_follower_drains_in_chunks_from_its_offset() -> None:
    follower = OutputFollower(FakeRangeProvider(b"0123456789"), "t", chunk_bytes=4, offset=2)
    assert follower.uses_ranges
    assert [await follower.read_new() for _ in range(4)] == ["2345", "6789", "", ""]
    assert follower.offset == 10


def test_follower_refuses_a_source_without_reads() -> None:
    with pytest.raises(TypeError, match="neither"):
        OutputFollower(object(), "t")


@pytest.mark.parametrize(("chunk", "offset"), [(0, 0), (1, -1)])
def test_follower_refuses_bad_numbers(chunk: int, offset: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        OutputFollower(FakeRangeProvider(b""), "t", chunk_bytes=chunk, offset=offset)
