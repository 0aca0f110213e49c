"""examples/git_history through ``sagents run-script``, against the reference ``mcp-server-git``,
on a repository the test creates: the report is known exactly."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.cli.cli_helpers import PEER_GIT, REPO, run_cli

EXAMPLE = REPO / "examples" / "git_history"

# (ISO date, author, {path: content or None to delete})
COMMITS: list[tuple[str, str, dict[str, str | None]]] = [
    ("2024-01-02T10:00:00+00:00", "Alice", {"a.txt": "a1\n", "b.txt": "b1\n"}),
    ("2024-01-03T10:00:00+00:00", "Bob", {"a.txt": "a2\n"}),
    ("2024-01-04T10:00:00+00:00", "Alice", {"dir/c.txt": "c1\n"}),
    ("2024-01-09T10:00:00+00:00", "Carol", {"a.txt": "a3\n", "b.txt": None}),
    ("2024-01-10T10:00:00+00:00", "Alice", {"dir/c.txt": "c2\n"}),
    ("2024-01-16T10:00:00+00:00", "Bob", {"dir/c.txt": "c3\n", "d.txt": "d1\n"}),
]

EXPECTED = """\
commits: 6, authors: 3, files changed: 4
commits per author:
     3  Alice <alice@example.com>
     2  Bob <bob@example.com>
     1  Carol <carol@example.com>
most-changed files (commits touching each, top 10):
     3  a.txt
     3  dir/c.txt
     2  b.txt
     1  d.txt
commits per week:
  2024-W01     3  ########################################
  2024-W02     2  ###########################
  2024-W03     1  #############
"""


def _make_repo(root: Path) -> None:
    root.mkdir()
    base = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str, env: dict[str, str] | None = None) -> None:
        subprocess.run(["git", *args], cwd=root, env={**base, **(env or {})}, check=True,
                       capture_output=True, timeout=30)  # fmt: skip

    git("init", "-q", "-b", "main")
    for date, author, changes in COMMITS:
        for path, content in changes.items():
            target = root / path
            if content is None:
                git("rm", "-q", path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            git("add", path)
        email = f"{author.lower()}@example.com"
        who = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": email,
               "GIT_COMMITTER_DATE": date}  # fmt: skip
        git("commit", "-q", "-m", f"{author} on {date[:10]}", env=who)


def test_git_report_through_run_script_prints_the_exact_report(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _make_repo(repo)
    config = json.loads((EXAMPLE / "mcp_servers.json").read_text())
    server = config["mcpServers"]["git"]
    assert server["args"] == ["--repository", "."]
    server["command"] = str(PEER_GIT)  # the example's relative path, made absolute
    server["cwd"] = str(repo)  # "--repository ." is the repository the test made
    config_path = tmp_path / "git.json"
    config_path.write_text(json.dumps(config))

    ran = run_cli(
        "run-script", str(EXAMPLE / "git_report.py"), "--config", str(config_path),
        "--mode", "read-only", "--workspace", str(tmp_path / "ws"), "--json",
        cwd=tmp_path, data_dir=tmp_path / "data",
    )  # fmt: skip

    out = ran.json()
    assert (out["status"], ran.returncode) == ("ok", 0), out["output"]
    assert (out["calls"], out["failed"]) == (7, 0)  # one git_log, six git_show
    assert out["calls_per_tool"] == {"git__git_log": 1, "git__git_show": 6}
    summary, report = out["output"].split("\n", 1)
    assert summary.startswith("run_script ok: 7 calls, 0 failed, ")
    assert report == EXPECTED.rstrip("\n")
