"""The operator secret: who may act as the operator on the gateway's HTTP surfaces.

Reaching the port proves nothing (a sandboxed server with network, another user's process, a
page in a browser on this machine can all reach a loopback port), so every HTTP surface of ours
authenticates, also on loopback without configured tokens (docs/gateway.md, "Threat model").
At start, the gateway (and ``sagents console --data-dir``) makes a random secret, kept in
``<data dir>/operator-secret`` with mode 0600 (every replica sharing the data directory reads
the same one), and prints a login URL with it on the operator's terminal (stderr), in the form
Jupyter uses: ``http://HOST:PORT/console/?token=SECRET``. Opening the URL logs a browser in;
machines (scripts, Prometheus) send ``Authorization: Bearer SECRET``.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sagents.errors import ConfigError

__all__ = ["LOGIN_QUERY", "OPERATOR_SECRET_FILE", "OperatorSecret"]

OPERATOR_SECRET_FILE = "operator-secret"
"""The secret's file name in the data directory."""
LOGIN_QUERY = "token"
"""The query parameter of the login URL (``/console/?token=SECRET``)."""
_SECRET_BYTES = 32  # 256 random bits
_SECRET = re.compile(r"[A-Za-z0-9_-]{32,256}")  # what a secret file may hold (RFC 6750 b64token)


@dataclass(frozen=True)
class OperatorSecret:
    """The operator's secret (never shown in a ``repr``).

    Attributes:
        value: The secret (URL-safe characters, also a valid RFC 6750 bearer token).
    """

    value: str = field(repr=False)

    def matches(self, token: str) -> bool:
        """Whether ``token`` is the secret (constant-time comparison)."""
        return hmac.compare_digest(token.encode(), self.value.encode())

    def login_url(self, page_url: str) -> str:
        """The URL that logs a browser in at ``page_url`` (``http://HOST:PORT/console/``)."""
        return f"{page_url}?{LOGIN_QUERY}={self.value}"

    @classmethod
    def load_or_create(cls, data_dir: Path) -> OperatorSecret:
        """The secret of ``data_dir``, made (0600, atomically) when there is none yet.

        Two processes starting at once on one data directory get the same secret: the file
        is written under a temporary name and linked into place, and the loser of the race
        reads the winner's.

        Raises:
            ConfigError: the file is not a regular file of ours, other users may read or
                write it, or it does not hold a secret (remove it: a new one is made); or
                there is none and the data directory cannot hold one.
        """
        path = data_dir / OPERATOR_SECRET_FILE
        try:
            return cls._read(path)
        except FileNotFoundError:
            pass
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = data_dir / f".{OPERATOR_SECRET_FILE}.{secrets.token_hex(8)}"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise ConfigError(
                f"cannot make the operator secret in {str(data_dir)!r}: {error.strerror}",
                file=str(path),
                hint="give a data directory this user can write (SAGENTS_DATA_DIR, or "
                "--data-dir for sagents console)",
            ) from error
        try:
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(secrets.token_urlsafe(_SECRET_BYTES) + "\n")
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        return cls._read(path)

    @classmethod
    def _read(cls, path: Path) -> OperatorSecret:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(path) from None  # no secret yet (or no data dir)
        except OSError as error:  # a symbolic link (ELOOP), a directory, no permission
            raise _bad(path, f"cannot be read ({error.strerror})") from error
        with os.fdopen(fd, "r", encoding="ascii", errors="replace") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                raise _bad(path, "is not a regular file owned by this user")
            if info.st_mode & 0o077:
                raise _bad(path, f"may be read by other users (mode {info.st_mode & 0o777:o})")
            value = file.read(1024).strip()
        if _SECRET.fullmatch(value) is None:
            raise _bad(path, "does not hold a secret")
        return cls(value)


def _bad(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"the operator secret {str(path)!r} {why}",
        file=str(path),
        hint="remove the file: a new secret is made at the next start (and printed as a login URL)",
    )
