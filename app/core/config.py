"""Service settings, read from the environment with the `ROLLOUT_` prefix.

Built once per `create_app(settings)` call and passed down explicitly, so tests can make as many
isolated apps (each with its own data dir and database) as they like.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import pwd
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core import layout

# Project-local by default, like MLflow's ./mlruns: a run's data sits next to the code that made
# it and `git status` never shows it (.gitignore lists it).
DEFAULT_DATA_DIR = Path(".rollout")
# Experiments' jobs yield the CPU to the API on a shared machine (docs/benchmarks.md, "Viewers
# of a run that trains").
JOB_NICENESS = 5


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROLLOUT_", extra="ignore")

    data_dir: Path = Field(
        default=DEFAULT_DATA_DIR,
        description="Where the SQLite database (by default), checkpoints and job files live.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default: a SQLite file rollout.db in the data dir.",
    )
    host: str = Field(default="127.0.0.1", description="Address `rollout serve` listens on.")
    port: int = Field(default=8000, ge=0, le=65535)
    api_token: SecretStr | None = Field(
        default=None,
        description="When set, every /api/v1 request and websocket must present it as a bearer "
        "token (websockets: as the subprotocol rollout.token.<base64url>). Required to listen on a "
        "non-loopback address.",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names (comma list; `.example.com` for a domain and its subdomains, "
        "`*` for any) the service answers to besides loopback ones, the address it is bound to "
        "and the host of public_url. Other Host headers get 400 (DNS-rebinding protection).",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins (comma list of scheme://host[:port], `*` for any) whose pages may "
        "change state or open websockets besides the service's own; every other Origin gets "
        "403. Requests without an Origin (CLI, scripts, jobs) are not affected.",
    )
    ray_address: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ROLLOUT_RAY_ADDRESS", "RAY_ADDRESS", "ray_address"),
        description="An existing Ray cluster; unset: the service starts a private local head.",
    )
    ray_warmup: bool = Field(
        default=True,
        description="Right after starting its local Ray head, run one no-op job in the "
        "background (imports torch and gymnasium, one tiny iteration), so the first experiment "
        "starts as fast as later ones. Not done on an external cluster.",
    )
    jobs_user: str | None = Field(
        default=None,
        description="Production isolation (docs/operations.md, 'Security model'): the OS user "
        "the local Ray head, so every job (user code), runs as. It cannot read the database, "
        "the checkpoints or the service's environment; the data dir is only traversable for it "
        "(0711) and its jobs/ dir is its own. Needs a service that may switch users (root).",
    )
    jobs_users: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Isolation between jobs (docs/operations.md, 'Production isolation'): a "
        "pool of OS users, comma-separated. Each job then runs on a local Ray cluster of its "
        "own, with a token of its own, as a user of the pool no other running job has: jobs "
        "cannot read, write or stop each other. As many jobs run at once as there are users. "
        "Needs a service that may switch users (root) and no external cluster.",
    )
    jobs_enabled: bool = Field(
        default=True, description="Launch experiments on Ray. Off: experiments stay pending."
    )
    max_concurrent_experiments: int = Field(default=4, ge=1)
    scheduled_evaluation_min_idle_cores: float = Field(
        default=1.0,
        ge=0.0,
        le=1024.0,
        description="A run's scheduled evaluations (evaluation_every) start only while this "
        "many of the API machine's cores were idle over the last 3 s, so they never slow "
        "training; 0 starts them whatever the load.",
    )
    job_niceness: int = Field(
        default=JOB_NICENESS,
        ge=0,
        le=19,
        description="CPU niceness of experiments' jobs (driver and Ray workers, and their "
        "sessions where Linux shares the CPU between sessions first): above 0 the API, on the "
        "same machine, gets a core first and stays responsive while runs train; training "
        "still takes all the CPU the API leaves idle. 0: the same priority.",
    )
    access_log_jobs: bool = Field(
        default=False,
        description="`rollout serve`'s access log shows the jobs' own successful calls "
        "(metric posts, uploads: most of its lines on a busy service). Off: only their errors.",
    )
    public_url: str | None = Field(
        default=None,
        description="Base URL jobs use to call the API back; default http://{host}:{port}.",
    )
    live_backend: Literal["auto", "memory", "postgres"] = Field(
        default="auto",
        description="How live messages reach websocket clients: in this process only (memory), "
        "or through PostgreSQL LISTEN/NOTIFY to every API process on the database (postgres). "
        "auto: postgres on a PostgreSQL database, memory otherwise.",
    )
    frontend_dir: Path | None = Field(
        default=None,
        description="Built dashboard to serve at /; default frontend/dist of the project.",
    )

    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="`rollout serve` closes a connection whose request headers are not complete "
        "this long after it opened (or after its previous response): slowloris clients.",
    )

    # --- request bodies (docs/operations.md) ---------------------------------------------------
    max_request_body_bytes: int = Field(
        default=8 * 1024**2,
        ge=1024,
        description="Largest request body (JSON: configs, metric batches, logs); larger is a "
        "413 before anything parses it. A job's metric batch of 500 rows is well under 1 MB.",
    )
    max_upload_bytes: int = Field(
        default=4 * 1024**3,
        ge=1024,
        description="Largest body of the routes that stream files (checkpoint and video uploads "
        "from jobs); the storage quotas apply on top.",
    )

    # --- storage: quotas and retention of what the service keeps (docs/operations.md) ---------
    max_storage_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Most bytes of checkpoint archives kept under <data dir>/checkpoints, uploads "
        "in flight included; an upload that would pass it is refused (507). Unset: no limit.",
    )
    min_free_bytes: int = Field(
        default=512 * 1024**2,
        ge=0,
        description="Free bytes the data dir's filesystem must keep after a checkpoint upload "
        "(room for the database and logs); an upload that would take them is refused (507).",
    )
    max_log_lines_per_experiment: int = Field(
        default=10_000,
        ge=1,
        description="Log lines kept per experiment; older ones are dropped as new ones arrive.",
    )

    @field_validator("jobs_user")
    @classmethod
    def _known_user(cls, value: str | None) -> str | None:
        if value:
            try:
                pwd.getpwnam(value)
            except KeyError:
                raise ValueError(f"no OS user {value!r} on this machine") from None
        return value or None

    @field_validator("jobs_users")
    @classmethod
    def _known_users(cls, value: list[str]) -> list[str]:
        for user in value:
            cls._known_user(user)
        if len(set(value)) != len(value):
            raise ValueError("each jobs user may be named once")
        if any(pwd.getpwnam(user).pw_uid == 0 for user in value):
            raise ValueError("a jobs user must not be root")
        return value

    @model_validator(mode="after")
    def _one_isolation(self) -> Settings:
        if self.jobs_users and self.jobs_user:
            raise ValueError("set ROLLOUT_JOBS_USER or ROLLOUT_JOBS_USERS, not both")
        if self.jobs_users and self.ray_address:
            raise ValueError(
                "ROLLOUT_JOBS_USERS starts a local Ray cluster per job: it cannot be used with "
                "an external cluster (ROLLOUT_RAY_ADDRESS / RAY_ADDRESS)"
            )
        return self

    @field_validator("allowed_hosts", "allowed_origins", "jobs_users", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{layout.database_file(self.data_dir).resolve()}"

    @property
    def uses_pg_notify(self) -> bool:
        if self.live_backend == "auto":
            return self.resolved_database_url.startswith("postgresql")
        return self.live_backend == "postgres"

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite database file (the default one or ROLLOUT_DATABASE_URL's), None for a
        server database or an in-memory one: the service keeps it 0600 (SQLite gives its
        -wal and -shm files the same mode)."""
        url = self.resolved_database_url
        if not url.startswith("sqlite:///") or url.endswith(":memory:"):
            return None
        return Path(url.removeprefix("sqlite:///").split("?", 1)[0])

    @property
    def checkpoints_dir(self) -> Path:
        return layout.checkpoints_dir(self.data_dir)

    @property
    def api_url(self) -> str:
        """The URL a job uses to reach this API."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def prepare_data_dir(self) -> None:
        """Create the data dir private to the service's OS user (0700: Ray makes its session
        and log dirs inside mode 0777 every time a worker starts, and the checkpoints and the
        SQLite file are nobody else's business) and the default SQLite file 0600."""
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.checkpoints_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        database = self.sqlite_file
        if database is not None:
            database.parent.mkdir(parents=True, exist_ok=True)
            database.touch(mode=0o600, exist_ok=True)
        # With a jobs user its processes must reach their job dirs (and the Ray head its temp
        # dir) inside the data dir, without listing it or reading anything else there.
        top = 0o711 if self.jobs_user or self.jobs_users else 0o700
        for path, mode in ((self.data_dir, top), (database, 0o600)):
            with contextlib.suppress(PermissionError):  # not ours to change (a shared mount)
                if path is not None:
                    path.chmod(mode)
        if self.jobs_user:
            give_to_jobs_user(layout.jobs_dir(self.data_dir), self.jobs_user)
        elif self.jobs_users:
            # The service's, passable for the pool: each job dir is given to its job's user
            # while it runs (app/jobs/job_clusters.py).
            for path in (layout.jobs_dir(self.data_dir), layout.evaluation_jobs_dir(self.data_dir)):
                path.mkdir(mode=0o711, parents=True, exist_ok=True)
                os.chown(path, os.getuid(), os.getgid())
                path.chmod(0o711)

    @property
    def api_token_value(self) -> str | None:
        return self.api_token.get_secret_value() if self.api_token else None


def give_to_jobs_user(directory: Path, user: str) -> None:
    """`directory` (made if missing) owned by `user`, 0700: its jobs write their files there,
    and the service (root, as it must be to switch users) reads them for salvage."""
    entry = pwd.getpwnam(user)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(directory, entry.pw_uid, entry.pw_gid)
    directory.chmod(0o700)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
