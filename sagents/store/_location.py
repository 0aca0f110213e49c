"""Where the gateway's shared state lives: ``--store`` / the config's ``store``.

Two kinds of address (docs/scale-out.md):

- nothing (the default), or ``sqlite:///<dir>``: embedded SQLite files in the data directory
  (``$SAGENTS_DATA_DIR``), for one gateway process;
- ``postgresql://user:password@host:port/dbname`` (libpq URI, also ``postgres://``): one
  PostgreSQL database shared by every replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from sagents.errors import ConfigError

__all__ = ["DEFAULT_LEASE_S", "StoreLocation", "parse_store_url", "redact_url"]

DEFAULT_LEASE_S = 15.0
"""Seconds a replica's heartbeat lease lasts: a replica silent for longer is dead, and another
one marks its running background calls ``failed`` (each replica beats every third of it)."""

_POSTGRES_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True, kw_only=True)
class StoreLocation:
    """A parsed store address.

    Attributes:
        kind: ``sqlite`` (embedded files) or ``postgresql`` (shared by replicas).
        url: The address as given (for PostgreSQL, the libpq URI passed to the driver).
        directory: For ``sqlite``, the folder of the files (None: the data directory).
        lease_s: Seconds of a replica's heartbeat lease (PostgreSQL only).
    """

    kind: Literal["sqlite", "postgresql"]
    url: str = ""
    directory: Path | None = None
    lease_s: float = DEFAULT_LEASE_S

    @property
    def shown(self) -> str:
        """The address without its password (for messages and logs)."""
        return redact_url(self.url) if self.url else "sqlite (data directory)"


def redact_url(url: str) -> str:
    """``url`` with the password of its user part replaced by ``***``."""
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    if not at or ":" not in user:
        return url
    return urlunsplit(parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}"))


def parse_store_url(
    value: str | None,
    *,
    key: str = "--store",
    file: str | None = None,
    lease_s: float | None = None,
) -> StoreLocation:
    """Read a store address.

    Args:
        value: ``postgresql://...``, ``sqlite:///dir``, or None / "" for the embedded default.
        key: Where it came from (``--store``, or ``store`` in a config file), for errors.
        file: The config file it came from, if any.
        lease_s: Seconds of a replica's lease; None for :data:`DEFAULT_LEASE_S`.

    Raises:
        ConfigError: an unknown scheme, a PostgreSQL address without a database name, a
            malformed port, or a lease that is not positive.
    """
    lease = DEFAULT_LEASE_S if lease_s is None else lease_s
    if not lease > 0:
        raise ConfigError("the lease must be more than 0 seconds", file=file, key=key)
    if not value:
        return StoreLocation(kind="sqlite", lease_s=lease)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as error:
        raise ConfigError(
            f"malformed store address {redact_url(value)!r}: {error}",
            file=file,
            key=key,
            hint="give postgresql://user:password@host:5432/dbname",
        ) from error
    if parts.scheme == "sqlite":
        directory = Path(parts.path) if parts.path not in ("", "/") else None
        return StoreLocation(kind="sqlite", url=value, directory=directory, lease_s=lease)
    if parts.scheme not in _POSTGRES_SCHEMES:
        raise ConfigError(
            f"unknown store {redact_url(value)!r}: the address must start with postgresql:// "
            "(a shared PostgreSQL database) or sqlite:// (embedded files)",
            file=file,
            key=key,
            hint="give postgresql://user:password@host:5432/dbname, or leave the store unset",
        )
    if not parts.path.strip("/") and "dbname=" not in parts.query:
        raise ConfigError(
            f"the store address {redact_url(value)!r} names no database",
            file=file,
            key=key,
            hint="add the database name: postgresql://user:password@host:5432/dbname",
        )
    del port  # parsed only to refuse a malformed one here rather than in the driver
    return StoreLocation(kind="postgresql", url=value, lease_s=lease)
