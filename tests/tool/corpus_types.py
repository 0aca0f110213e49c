"""The shape of one corpus case (shared by the corpus modules and the corpus test)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """A signature under test and argument samples in the original schema's form."""

    func: Callable[..., Any]
    valid: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
