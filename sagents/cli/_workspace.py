"""The ``--workspace`` option of ``serve``, ``demo`` and ``run-script``: a directory, created
with a notice when missing; anything else is a usage error (docs/cli_run_script.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from sagents.errors import ConfigError

__all__ = ["prepare_workspace"]


def prepare_workspace(path: Path, *, command: str) -> Path:
    """Check ``--workspace``: an existing directory is used as it is; a missing one is created
    (with its parents) and a notice naming it goes to stderr.

    Args:
        path: The directory given.
        command: The command's name for the notice (``sagents serve``).

    Returns:
        The absolute path.

    Raises:
        ConfigError: the path exists and is not a directory, or it cannot be created.
    """
    workspace = path.expanduser().resolve()
    if workspace.exists() and not workspace.is_dir():
        raise ConfigError(
            f"--workspace {str(workspace)!r} is not a directory: "
            "pass a directory (one that does not exist yet is created)"
        )
    if not workspace.exists():
        try:
            workspace.mkdir(parents=True)
        except OSError as error:
            raise ConfigError(
                f"--workspace {str(workspace)!r} cannot be created: {error.strerror}"
            ) from None
        print(f"{command}: created the workspace directory {workspace}", file=sys.stderr)
    return workspace
