"""Which keys a reload names as needing a restart: the typed sections compare by value, so the
same file read twice changes nothing, and one changed key is named."""

from __future__ import annotations

from typing import Any

import pytest

from sagents.config import parse_config
from sagents.gateway._reload import _needs_restart

SECTIONS: dict[str, Any] = {
    "mcpServers": {},
    "sandbox": {"provider": "bwrap"},
    "builtinTools": {
        "enabled": ["web_fetch", "image_understanding"],
        "webFetch": {"allowHosts": ["intranet.example"], "maxBytes": 1000},
        "imageUnderstanding": {"model": "vision-1", "maxSide": 512},
    },
}


def test_the_same_file_read_twice_needs_no_restart() -> None:
    assert _needs_restart(parse_config(SECTIONS), parse_config(SECTIONS)) == ()


@pytest.mark.parametrize(
    ("changed", "key"),
    [
        ({"sandbox": {"provider": "other"}}, "sandbox"),
        (
            {"builtinTools": {**SECTIONS["builtinTools"], "webFetch": {"maxBytes": 2000}}},
            "builtinTools.webFetch",
        ),
        (
            {"builtinTools": {**SECTIONS["builtinTools"], "imageUnderstanding": {"maxSide": 9}}},
            "builtinTools.imageUnderstanding",
        ),
    ],
)
def test_a_changed_typed_section_is_named(changed: dict[str, Any], key: str) -> None:
    assert _needs_restart(parse_config(SECTIONS), parse_config({**SECTIONS, **changed})) == (key,)
