"""Byte-window decoding for ``read_background_output_range``: never split a character."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.sandbox import decode_utf8_window


def test_ascii_window_is_cut_at_max_bytes() -> None:
    assert decode_utf8_window(b"abcdef", 4, final=False) == ("abcd", 4)


def test_incomplete_trailing_character_is_held_back() -> None:
    euro = "€".encode()  # 3 bytes
    assert decode_utf8_window(b"ab" + euro[:2], 10, final=False) == ("ab", 2)


def test_a_character_wider_than_the_budget_is_returned_whole() -> None:
    emoji = "😀".encode()  # 4 bytes
    assert decode_utf8_window(emoji + b"x", 2, final=False) == ("😀", 4)


def test_only_the_start_of_a_character_waits_for_more() -> None:
    assert decode_utf8_window("😀".encode()[:2], 10, final=False) == ("", 0)


def test_an_unfinished_character_is_replaced_once_the_writer_is_done() -> None:
    assert decode_utf8_window("😀".encode()[:2], 10, final=True) == ("\ufffd", 2)


def test_invalid_bytes_are_replaced_and_consumed() -> None:
    assert decode_utf8_window(b"a\xffb\xe2Ab", 10, final=False) == ("a\ufffdb\ufffdAb", 6)


def test_a_non_positive_budget_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        decode_utf8_window(b"abc", 0, final=False)


@given(text=st.text(max_size=60), budget=st.integers(min_value=1, max_value=9))
def test_reading_in_windows_reassembles_the_text_exactly(text: str, budget: int) -> None:
    data = text.encode()
    offset = 0
    pieces: list[str] = []
    for _ in range(len(data) + 1):
        window = data[offset : offset + budget + 3]
        piece, used = decode_utf8_window(window, budget, final=len(window) <= budget)
        if not used:
            break
        pieces.append(piece)
        offset += used
    assert offset == len(data)
    assert "".join(pieces) == text
