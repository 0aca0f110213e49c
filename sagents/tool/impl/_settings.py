"""Caps and defaults of the built-in tools (docs/builtin_tools.md), in one frozen value.

Every cap exists so that one call can neither flood the model's context nor hold unbounded
memory in our process; each result says when a cap cut it short.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BuiltinSettings"]


@dataclass(frozen=True, kw_only=True)
class BuiltinSettings:
    """Caps and defaults of the built-in shell and file tools.

    Attributes:
        shell_tail_bytes: Bytes of a task's output kept in a shell result (the end of the log).
        shell_default_wait_seconds: How long ``execute_shell_command``/``await_shell`` block
            when the call does not say.
        shell_max_wait_seconds: The longest blocking wait a call may ask for.
        shell_poll_seconds: How often a blocking wait reads new output for live progress.
        shell_max_tasks_per_session: Tasks remembered per session; beyond it the oldest
            finished ones are forgotten (their ids become ``task_not_found``).
        read_chunk_bytes: Bytes per log read while following output.
        file_max_bytes: Largest file ``file_read``/``file_update``/``grep`` load (bytes).
        file_default_lines: Lines ``file_read`` returns when no range is given.
        file_max_result_chars: Characters of file text one ``file_read`` returns at most.
        max_line_chars: Longer lines are cut in ``file_read`` and ``grep`` results.
        list_max_entries: Entries one ``list_dir`` returns at most.
        glob_max_results: Paths one ``glob`` returns at most.
        grep_max_matches: Matching lines one ``grep`` returns at most.
        grep_max_files: Files one ``grep`` searches at most.
    """

    shell_tail_bytes: int = 16 * 1024
    shell_default_wait_seconds: float = 30.0
    shell_max_wait_seconds: float = 600.0
    shell_poll_seconds: float = 0.1
    shell_max_tasks_per_session: int = 100
    read_chunk_bytes: int = 256 * 1024
    file_max_bytes: int = 10 * 1024 * 1024
    file_default_lines: int = 2000
    file_max_result_chars: int = 100_000
    max_line_chars: int = 2000
    list_max_entries: int = 1000
    glob_max_results: int = 1000
    grep_max_matches: int = 200
    grep_max_files: int = 10_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value <= 0:
                raise ValueError(f"builtin setting {name!r} must be positive, got {value!r}")
