"""A run_script script: a compact report on the last 200 commits of a Git repository.

It lists the commits with ``git_log``, reads every commit with ``call_many("git__git_show")``
and prints commits per author, the most-changed files and commits per ISO week. Run it with
``sagents run-script examples/git_history/git_report.py --config
examples/git_history/mcp_servers.json`` from the repository to report on (see README.md).
"""

import re
from collections import Counter

from agent_tools import call, call_many, progress

REPO = "."  # resolved by the git server: its --repository (the config runs it on ".")
LIMIT = 200  # commits, newest first
TOP = 10  # rows of the author and file tables
BAR = 40  # characters of the longest bar of the weekly histogram
BATCH = 50  # commits per call_many, for progress between batches

SHA = re.compile(r"^Commit: ([0-9a-f]{40})$", re.MULTILINE)
AUTHOR = re.compile(r"^Author: (.*)$", re.MULTILINE)
DATE = re.compile(r"^Date:\s+(\d{4})-(\d\d)-(\d\d) ", re.MULTILINE)
FILES = re.compile(r"\n--- (/dev/null|a/[^\n]+)\n\+\+\+ (/dev/null|b/[^\n]+)\n")


def changed_files(show):
    """The paths a commit touched, from the file headers of ``git_show``'s patch."""
    paths = set()
    for old, new in FILES.findall(show):
        paths.add(new[2:] if new != "/dev/null" else old[2:])
    return paths


def iso_week(show):
    """The commit's ISO week, ``YYYY-Www``, from its author date."""
    import datetime

    year, month, day = (int(part) for part in DATE.search(show).groups())
    iso = datetime.date(year, month, day).isocalendar()
    return f"{iso[0]}-W{iso[1]:02d}"


def table(counter):
    rows = sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return [f"  {count:>4}  {name}" for name, count in rows] or ["  (none)"]


log = call("git__git_log", {"repo_path": REPO, "max_count": LIMIT})
shas = SHA.findall(log if isinstance(log, str) else str(log))
shows = []
for start in range(0, len(shas), BATCH):
    batch = shas[start : start + BATCH]
    shows += call_many("git__git_show", [{"repo_path": REPO, "revision": s} for s in batch])
    progress(len(shows), len(shas), "reading commits")

authors = Counter(AUTHOR.search(show).group(1) for show in shows)
files = Counter(path for show in shows for path in changed_files(show))
weeks = Counter(iso_week(show) for show in shows)

print(f"commits: {len(shas)}, authors: {len(authors)}, files changed: {len(files)}")
print("commits per author:")
print("\n".join(table(authors)))
print(f"most-changed files (commits touching each, top {TOP}):")
print("\n".join(table(files)))
print("commits per week:")
busiest = max(weeks.values(), default=1)
for week in sorted(weeks):
    print(f"  {week}  {weeks[week]:>4}  {'#' * max(1, round(BAR * weeks[week] / busiest))}")
