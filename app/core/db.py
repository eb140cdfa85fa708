"""Engine, sessions, the declarative base (with a naming convention) and migrations.

Sessions are synchronous SQLAlchemy 2 sessions: HTTP handlers that touch the database are plain
`def` functions (FastAPI runs them in its thread pool) and async code runs database work with
`asyncio.to_thread`. Messages for live subscribers are queued on the session with
`publish_after_commit` and delivered only once the transaction has committed, so a websocket
client never sees a state the database does not hold.

Every sessionmaker has a read-only twin (`read_only(factory)`) for work that never writes (GET
handlers, /health, websocket backlogs). On SQLite its transactions are deferred and `query_only`:
with WAL they read a snapshot without ever taking the write lock, so a long query cannot stall
ingest; writers keep `BEGIN IMMEDIATE` and serialise among themselves.
"""

from __future__ import annotations

import datetime as dt
import enum as enum_module
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

from sqlalchemy import (
    Connection,
    DateTime,
    Engine,
    Enum,
    Integer,
    MetaData,
    String,
    Text,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.sql.base import ExecutableOption
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from app.core.errors import NotFound

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS_DIR = PROJECT_ROOT / "migrations"

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
# How long a SQLite transaction waits for another one's write lock before it fails.
SQLITE_BUSY_TIMEOUT_S = 30
# Execution option that marks a connection's transactions read-only (see `read_only`).
READ_ONLY = "rollout_read_only"
# Serialises migrations of API processes starting together on one PostgreSQL database.
MIGRATION_LOCK_KEY = 0x526F6C6C  # "Roll"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# The id of a row users see or other rows reference (with NEVER_REUSE_IDS on SQLite).
IntPK = Annotated[int, mapped_column(Integer, primary_key=True, autoincrement=True)]


def status_type(enum: type[enum_module.Enum]) -> Enum:
    """A status column's type: the enum's values as short strings, no database enum or CHECK
    (a new status is then a code change, not a migration)."""
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda e: [m.value for m in e],
    )


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use utcnow()")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class JobColumns:
    """The columns of a row that runs as a Ray job (an experiment, an evaluation): its clock,
    its job's id and credentials (app/core/auth.py), and how it failed."""

    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # submitted to Ray
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    ray_job_id: Mapped[str | None] = mapped_column(String(128))
    job_token_hash: Mapped[str | None] = mapped_column(String(64))
    # One-time code the launched job exchanges for its token (docs/operations.md).
    job_claim_hash: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    log_tail: Mapped[str | None] = mapped_column(Text)


class Publisher(Protocol):
    """What the session needs from the live hub: a thread-safe, non-blocking publish."""

    def publish(self, topic: str, message: dict[str, Any]) -> None: ...


def make_engine(url: str) -> Engine:
    """An engine with the settings each backend needs for a multi-threaded web service."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
            # sqlite3 (legacy transaction control) would BEGIN only at the first write, so a
            # locking read (`get(..., lock=True)`) guarded nothing; `_begin_immediate` begins.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            # WAL: cheap commits (synchronous=NORMAL is safe with it) for frequent small ingests.
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            if conn.get_execution_options().get(READ_ONLY):
                # A reader: a deferred transaction reads one WAL snapshot and never takes the
                # write lock; query_only turns an accidental write into an error, not a lock.
                conn.exec_driver_sql("PRAGMA query_only=1")
                conn.exec_driver_sql("BEGIN")
                return
            # A writer takes the write lock up front (SQLAlchemy's recipe for SQLite
            # transactions): it reads and writes one consistent state, one writer at a time;
            # the others wait up to the busy timeout (a deferred read-then-write transaction
            # would fail with SQLITE_BUSY at once instead, as WAL cannot upgrade a stale
            # snapshot).
            conn.exec_driver_sql("PRAGMA query_only=0")
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


SessionMaker = sessionmaker[Session]

_PENDING = "rollout_pending_messages"


Notifier = Callable[[Session, list[tuple[str, dict[str, Any]]]], None]


def make_sessionmaker(
    engine: Engine,
    hub: Publisher | None = None,
    notifier: Notifier | None = None,
    settings: Any = None,
) -> SessionMaker:
    """Sessions that deliver `publish_after_commit` messages to `hub` after each commit.

    With a `notifier` (PostgreSQL LISTEN/NOTIFY across API processes), messages go into the
    transaction itself instead and reach every process's hub through its listener. `settings`
    (the service's, in `session.info["settings"]`) give domain services their limits.
    """
    import app.models  # noqa: F401  every table a flush may need (foreign keys into them)

    # Each session's info is a shallow copy: `progress_announced` (experiment id -> monotonic
    # time of its last progress announcement) is one dict for all sessions of this factory.
    info = {"hub": hub, "settings": settings, "progress_announced": {}}
    factory = sessionmaker(bind=engine, expire_on_commit=False, info=info)
    _READ_ONLY_TWINS[factory] = make_read_only_sessionmaker(engine)

    @event.listens_for(factory, "before_commit")
    def _notify(session: Session) -> None:
        # Across processes: the messages ride in the transaction, one statement for all.
        if notifier is not None and session.info.get(_PENDING):
            notifier(session, session.info.pop(_PENDING))

    @event.listens_for(factory, "after_commit")
    def _deliver(session: Session) -> None:
        messages = session.info.pop(_PENDING, [])
        target = session.info.get("hub")
        if target is not None:
            for topic, message in messages:
                target.publish(topic, message)

    @event.listens_for(factory, "after_soft_rollback")
    def _discard(session: Session, _: Any) -> None:
        session.info.pop(_PENDING, None)

    return factory


def make_read_only_sessionmaker(engine: Engine) -> SessionMaker:
    """Sessions for work that never writes: deferred, query-only transactions on SQLite."""
    factory = sessionmaker(
        bind=engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False
    )

    @event.listens_for(factory, "before_flush")
    def _refuse(session: Session, *_: Any) -> None:
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("a read-only session was asked to write")

    return factory


_READ_ONLY_TWINS: weakref.WeakKeyDictionary[SessionMaker, SessionMaker] = (
    weakref.WeakKeyDictionary()
)


def read_only(factory: SessionMaker) -> SessionMaker:
    """The read-only twin of a sessionmaker made by `make_sessionmaker` (same engine)."""
    twin = _READ_ONLY_TWINS.get(factory)
    if twin is None:
        bind = factory.kw["bind"]
        twin = _READ_ONLY_TWINS[factory] = make_read_only_sessionmaker(bind)
    return twin


T = TypeVar("T")


def get_row(
    session: Session,
    model: type[T],
    row_id: int,
    what: str,
    *,
    lock: bool = False,
    options: Sequence[ExecutableOption] = (),
) -> T:
    """The `model` row with primary key `row_id` (`lock`: SELECT ... FOR UPDATE), or NotFound
    ("<what> <id> does not exist")."""
    stmt = select(model).where(model.id == row_id).options(*options)  # type: ignore[attr-defined]
    if lock:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).one_or_none()
    if row is None:
        raise NotFound(f"{what} {row_id} does not exist")
    return row


def rows_where(
    session: Session, model: type[T], where: ColumnElement[bool], order_by: Any
) -> list[T]:
    """Every `model` row that matches `where` (a parent's children, mostly), in order."""
    return list(session.scalars(select(model).where(where).order_by(order_by)))


def publish_after_commit(session: Session, topic: str, message: Any) -> None:
    """Queue a live message (an app/live/messages.py model, or the dict of one: metrics on
    the hot path); it goes out only if the surrounding transaction commits."""
    wire = message if isinstance(message, dict) else message.wire()
    session.info.setdefault(_PENDING, []).append((topic, wire))


@contextmanager
def transaction(factory: SessionMaker) -> Iterator[Session]:
    """One session, committed on success and rolled back on error."""
    with factory() as session, session.begin():
        yield session


def run_in_transaction(factory: SessionMaker, fn: Callable[..., T], *args: Any) -> T:
    """Call `fn(session, *args)` in one transaction (meant for `asyncio.to_thread`)."""
    with transaction(factory) as session:
        return fn(session, *args)


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config(str(PROJECT_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (start-up runs this to head)."""
    from alembic import command

    _run_alembic(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    _run_alembic(engine, command.downgrade, revision)


def _run_alembic(engine: Engine, fn: Callable[[Any, str], None], revision: str) -> None:
    """Run an Alembic command in one transaction on one connection.

    SQLite: foreign keys are off meanwhile (batch migrations copy, drop and rename tables, and
    a DROP TABLE with foreign keys on would cascade into every child table), then checked.
    PostgreSQL: an advisory lock makes API processes that start together migrate one by one.
    """
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Outside any transaction (the pragma is a no-op inside one).
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        try:
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    lock = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
                    connection.exec_driver_sql(lock)
                cfg.attributes["connection"] = connection
                fn(cfg, revision)
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise RuntimeError(f"migration left dangling foreign keys: {broken[:5]}")
        finally:
            if sqlite:
                connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")
