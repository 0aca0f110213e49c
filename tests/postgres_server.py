"""A real PostgreSQL server for the tests: ``initdb`` and ``pg_ctl`` from Debian's
``postgresql`` package on a temporary directory and a free loopback port (no system service).

``scripts/setup.sh --test`` installs the package when run as root. Where the binaries are
missing, the tests that need the server are skipped with a message saying so. As root (where
``initdb`` refuses to run), the server runs as the ``postgres`` user the package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "postgres_server"]

SKIP_REASON = (
    "PostgreSQL binaries not found (/usr/lib/postgresql/*/bin/initdb): install them with "
    "'apt-get install postgresql' or scripts/setup.sh --test as root"
)
_USER = "sagents"


@dataclass(frozen=True)
class PostgresServer:
    """A running server; :meth:`new_database` gives each test its own database; :meth:`stop`
    and :meth:`start` take it down and bring it back (outage tests)."""

    port: int
    bin_dir: Path
    data: Path | None = None
    prefix: tuple[str, ...] = ()

    def url(self, database: str = "postgres") -> str:
        """The libpq URI of ``database`` (trust authentication on 127.0.0.1)."""
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """Create an empty database; returns its URI."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        subprocess.run(
            [str(self.bin_dir / "psql"), self.url(), "-q", "-c", f"CREATE DATABASE {name}"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once (``pg_ctl stop -m immediate``: a crash, no clean shutdown)."""
        assert self.data is not None
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def start(self) -> None:
        """Start the stopped server again on the same port and data (waits until it accepts)."""
        assert self.data is not None
        self._pg_ctl("-l", str(self.data.parent / "server.log"), "-w", "-t", "60", "start")

    def _pg_ctl(self, *arguments: str) -> None:
        assert self.data is not None
        subprocess.run(
            [*self.prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *arguments],
            check=True,
            capture_output=True,
            timeout=120,
        )


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: p.split("/")[4])
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server(bin_dir: Path, *, durable: bool = False) -> Iterator[PostgresServer]:
    """Start a server on a temporary directory; stop it (immediately) and remove it after.

    Args:
        bin_dir: Where ``initdb`` and ``pg_ctl`` are.
        durable: Keep ``fsync`` on (benchmarks); off by default (tests need no durability).
    """
    root = Path(tempfile.mkdtemp(prefix="sagents-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the package's user
        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    port = _free_port()
    subprocess.run(
        [
            *prefix,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            _USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    fsync = "on" if durable else "off"
    # the settings live in the data directory, so that a later start (stop, start: the
    # outage tests) brings the server back as it was
    (data / "postgresql.auto.conf").write_text(
        f"port = {port}\nunix_socket_directories = '{root}'\n"
        f"listen_addresses = '127.0.0.1'\nfsync = {fsync}\nmax_connections = 200\n"
    )
    server = PostgresServer(port=port, bin_dir=bin_dir, data=data, prefix=tuple(prefix))
    server.start()
    try:
        yield server
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def bench_database(url: str | None) -> Iterator[str]:
    """The benches' database: ``url`` when given, else a new database of a private durable
    cluster (fsync on, as SQLite's commits); exits saying how when PostgreSQL is missing."""
    if url:
        yield url
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit(
            "PostgreSQL binaries not found: apt-get install postgresql, or pass --store"
        )
    with postgres_server(bin_dir, durable=True) as server:
        yield server.new_database()
