"""A PostgreSQL server for the service tests: the local one on 127.0.0.1:5432 if it answers,
otherwise a throwaway cluster (initdb + pg_ctl, as the postgres user when running as root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

DEFAULT_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def postgres_available(admin_dsn: str | None = None) -> bool:
    """A server answers, or one can be started here."""
    admin_dsn = admin_dsn or os.environ.get("ROLLOUT_TEST_POSTGRES_ADMIN", DEFAULT_ADMIN)
    return _reachable(admin_dsn) or bool(shutil.which("initdb") and shutil.which("pg_ctl"))


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


class ThrowawayServer:
    """A PostgreSQL cluster of our own (initdb + pg_ctl on a free port): tests may stop and
    start it again (a database outage) without touching anyone else's server."""

    def __init__(self) -> None:
        initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("no initdb/pg_ctl to start a PostgreSQL server")
        self.pg_ctl = pg_ctl
        self.parent = Path(tempfile.mkdtemp(prefix="rollout-pg-"))
        self.data = self.parent / "data"
        if os.geteuid() == 0:
            shutil.chown(self.parent, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        subprocess.run(
            _as_postgres([initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust",
                          "--no-sync"]),
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.parent} -c listen_addresses=127.0.0.1 -c fsync=off"
        # The server inherits pg_ctl's stdout/stderr: send them to a log file, never to a pipe
        # that would stay open (and block us) for the server's lifetime.
        log = self.parent / "server.log"
        self._pg_ctl("-l", str(log), "-w", "-t", "60", "-o", options, "start", check=True)

    def stop(self) -> None:
        """Fast shutdown: open connections are terminated, as in a crash or failover."""
        self._pg_ctl("-m", "fast", "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.parent, ignore_errors=True)

    def _pg_ctl(self, *args: str, check: bool) -> None:
        subprocess.run(
            _as_postgres([self.pg_ctl, "-D", str(self.data), *args]),
            check=check,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=90,
        )


@contextmanager
def throwaway_server() -> Iterator[str]:
    """initdb + pg_ctl on a free port; stopped and removed afterwards."""
    server = ThrowawayServer()
    try:
        server.start()
        yield server.dsn
    finally:
        server.remove()


@contextmanager
def fresh_database(admin_dsn: str | None = None) -> Iterator[str]:
    """A new, empty database for this test session; dropped at the end.

    Yields a SQLAlchemy URL (postgresql+psycopg://...).
    """
    admin_dsn = admin_dsn or os.environ.get("ROLLOUT_TEST_POSTGRES_ADMIN", DEFAULT_ADMIN)
    if _reachable(admin_dsn):
        with _database_on(admin_dsn) as url:
            yield url
    else:
        with throwaway_server() as dsn, _database_on(dsn) as url:
            yield url


@contextmanager
def _database_on(admin_dsn: str) -> Iterator[str]:
    name = f"rollout_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_dsn.rsplit("/", 1)[0]
    try:
        yield f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
