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


@contextmanager
def throwaway_server() -> Iterator[str]:
    """initdb + pg_ctl on a free port; stopped and removed afterwards."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("no PostgreSQL on 127.0.0.1:5432 and no initdb/pg_ctl to start one")
    parent = Path(tempfile.mkdtemp(prefix="rollout-pg-"))
    data = parent / "data"
    if os.geteuid() == 0:
        shutil.chown(parent, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(
        _as_postgres([initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"]),
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -k {parent} -c listen_addresses=127.0.0.1 -c fsync=off"
    # The server inherits pg_ctl's stdout/stderr: send them to a log file, never to a pipe
    # that would stay open (and block us) for the server's lifetime.
    log = parent / "server.log"
    subprocess.run(
        _as_postgres(
            [pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, "start"]
        ),
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=90,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        shutil.rmtree(parent, ignore_errors=True)


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
