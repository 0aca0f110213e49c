"""What a program imports, run in a fresh interpreter (``sys.modules`` of the test process
already holds everything)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def imported_modules(snippet: str, packages: tuple[str, ...]) -> list[str]:
    """Run ``snippet`` in a new interpreter; the modules of ``packages`` (each a module or
    package name: it and its submodules) it left in ``sys.modules``, sorted.

    Args:
        snippet: The program (dedented before it runs).
        packages: The module names to look for.
    """
    program = textwrap.dedent(snippet) + textwrap.dedent(
        f"""
        import json, sys
        packages = {packages!r}
        print(json.dumps(sorted(
            m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in packages)
        )))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert isinstance(found, list)
    return [str(name) for name in found]
