"""A real job on the shared local Ray cluster holds only its own job token: none of the
service's secrets are in the environment of its driver or its EnvRunner actors (where user env
modules run), and Ray's job listing, which its dashboard shows to anyone, holds no job token.
Nor can a job read another job's token: a hostile env module (tests/service/job_snoop.py), in
a driver and in an EnvRunner, finds every process of a running job non-dumpable."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.core.auth import hash_token
from app.core.config import JOB_NICENESS, Settings
from app.core.db import make_engine, make_sessionmaker
from app.core.layout import experiment_job_dir
from app.experiments.models import Experiment
from app.jobs.ray_head import LocalRayHead, cluster_environ
from tests import other_users
from tests.conftest import SERVICE_SECRETS
from tests.other_users import ServedApi, fresh_users, why_not_other_users
from tests.serve_process import rollout_serve
from tests.service import env_spy, job_snoop, job_trespass
from tests.service.test_e2e_jobs import LiveService, driver_pid, make_settings, wait_for
from tests.service.test_job_faults import _job_processes

pytestmark = pytest.mark.ray

API_TOKEN = SERVICE_SECRETS["ROLLOUT_API_TOKEN"]
DB_PASSWORD = "db-password-never-in-jobs"


@pytest.fixture
def secured_service(
    ray_head: LocalRayHead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveService]:
    """`rollout serve` with ROLLOUT_API_TOKEN (and a database URL) in its environment."""
    for key, value in SERVICE_SECRETS.items():
        monkeypatch.setenv(key, value)
    settings = make_settings(tmp_path / "data", ray_head.address).model_copy(
        update={"api_token": SecretStr(API_TOKEN)}
    )
    live = LiveService(settings)
    live.http.headers["Authorization"] = f"Bearer {API_TOKEN}"
    live.start()
    try:
        yield live
    finally:
        live.stop()


def as_json(details: Any) -> Any:
    """Ray's JobDetails as the JSON its dashboard serves."""
    dump = getattr(details, "model_dump", None) or details.dict
    return json.loads(json.dumps(dump(), default=str))


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def job_token_hash(live: LiveService, exp_id: int) -> str | None:
    engine = make_engine(live.settings.resolved_database_url)
    try:
        with make_sessionmaker(engine)() as session:
            return session.get(Experiment, exp_id).job_token_hash
    finally:
        engine.dispose()


def spy_config(dump_dir: Path, num_env_runners: int) -> dict[str, Any]:
    dump_dir.mkdir()
    return {
        "env_id": f"tests.service.env_spy:{env_spy.ENV_ID}",
        "env_config": {"dump_dir": str(dump_dir)},
        "num_env_runners": num_env_runners,
        "num_envs_per_env_runner": 2,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 128,
        "num_epochs": 1,
        "stop": {"env_steps": 50_000_000},
        "checkpoint_every": 0,
    }


def test_a_job_holds_no_service_secret_and_ray_lists_no_job_token(
    secured_service: LiveService, ray_head: LocalRayHead, tmp_path: Path
) -> None:
    # Imported late: Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER (set by the ray_head fixture)
    # when it is first imported.
    from ray.job_submission import JobSubmissionClient

    live = secured_service
    # Serial mode builds the env in the job driver; one EnvRunner builds it in a Ray worker.
    dirs = {"driver": tmp_path / "driver", "worker": tmp_path / "worker"}
    ids = {
        "driver": live.submit(spy_config(dirs["driver"], 0), name="spy in the driver"),
        "worker": live.submit(spy_config(dirs["worker"], 1), name="spy in a worker"),
    }
    hashes: dict[str, str | None] = {}
    infos: dict[str, Any] = {}
    try:
        client = JobSubmissionClient(ray_head.dashboard_url)
        for kind, exp_id in ids.items():
            wait_for(lambda e=exp_id: live.metric_steps(e), 120, f"metrics of {kind}")
            hashes[kind] = job_token_hash(live, exp_id)
            ray_job_id = live.experiment(exp_id)["ray_job_id"]
            listed = [as_json(i) for i in client.list_jobs() if i.submission_id == ray_job_id]
            infos[kind] = {"listed": listed, "info": as_json(client.get_job_info(ray_job_id))}
    finally:
        for exp_id in ids.values():
            live.http.post(f"/experiments/{exp_id}/stop")
        for exp_id in ids.values():
            live.wait_status(exp_id, {"stopped", "failed", "succeeded"}, 120)

    for kind, exp_id in ids.items():
        token_hash = hashes[kind]
        assert token_hash, f"the {kind} job redeemed its claim for a token"
        # Ray's job listing: the runtime_env is there, the job token and service secrets not.
        env_vars = infos[kind]["info"]["runtime_env"]["env_vars"]
        assert infos[kind]["listed"] and env_vars["ROLLOUT_EXPERIMENT_ID"] == str(exp_id)
        for value in strings(infos[kind]):
            assert hash_token(value) != token_hash
            assert API_TOKEN not in value and DB_PASSWORD not in value
        assert "ROLLOUT_JOB_TOKEN" not in env_vars
        spent = httpx.post(
            f"{live.url}/api/v1/jobs/experiments/{exp_id}/token",
            headers={"Authorization": f"Bearer {env_vars['ROLLOUT_JOB_CLAIM']}"},
        )
        assert spent.status_code == 403, "a claim read from Ray's listing is already spent"

        # What user code sees in the process that built its env.
        records = [json.loads(p.read_text()) for p in dirs[kind].glob("env-*.json")]
        argv = [" ".join(r["argv"]) for r in records]
        where = "trainer/job.py" if kind == "driver" else "default_worker.py"
        assert any(where in a for a in argv), argv
        for record in records:
            # Driver and EnvRunner alike run at the jobs' niceness: the API gets a core first.
            assert record["niceness"] == JOB_NICENESS, (kind, record["argv"])
            environ: dict[str, str] = record["environ"]
            assert not set(SERVICE_SECRETS) & set(environ), sorted(environ)
            assert "ROLLOUT_JOB_TOKEN" not in environ
            for value in environ.values():
                assert API_TOKEN not in value and DB_PASSWORD not in value
                assert hash_token(value) != token_hash


def test_the_cluster_environment_drops_the_service_settings() -> None:
    environ = {
        "PATH": "/usr/bin",
        "RAY_AUTH_MODE": "disabled",
        "ROLLOUT_API_TOKEN": "x",
        "ROLLOUT_DATABASE_URL": "postgresql://u:p@h/d",
        "ROLLOUT_DATA_DIR": "/data",
        "PGPASSWORD": "p",
    }
    assert cluster_environ(environ) == {"PATH": "/usr/bin", "RAY_AUTH_MODE": "disabled"}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def snoop_config(dump_dir: Path, num_env_runners: int) -> dict[str, Any]:
    return {
        **spy_config(dump_dir, num_env_runners),
        "env_id": f"tests.service.job_snoop:{job_snoop.ENV_ID}",
    }


def test_a_job_cannot_read_another_jobs_memory_or_environment(
    secured_service: LiveService, ray_head: LocalRayHead, tmp_path: Path
) -> None:
    live = secured_service
    victim = live.submit(spy_config(tmp_path / "victim", 1), name="victim")
    dirs = {"driver": tmp_path / "driver", "worker": tmp_path / "worker"}
    snoops: dict[str, int] = {}
    try:
        wait_for(lambda: live.metric_steps(victim), 120, "the victim's metrics")
        # Its driver and its EnvRunner (the test runs as the job's user or root: it can tell):
        # the processes that hold what a job knows. Not Ray's own: the shell Ray starts the
        # driver under and the job's JobSupervisor actor, which never see the token (the
        # last assertion checks that no bearer token is readable in any of them either).
        victim_python = {
            pid: cmd
            for pid in _job_processes(ray_head, victim, live.url)
            if ((cmd := _cmdline(pid)).startswith(b"ray::") and b"JobSupervisor" not in cmd)
            or (b"python" in cmd.split(b"\0")[0] and b"trainer.job" in cmd)
        }
        driver = driver_pid(ray_head, live, victim)
        assert driver in victim_python and len(victim_python) >= 2, victim_python
        # One snoop at a time: the cluster fits the victim and one of them.
        for kind, n in (("driver", 0), ("worker", 1)):
            snoops[kind] = live.submit(snoop_config(dirs[kind], n), name=f"snoop in the {kind}")
            found = lambda d=dirs[kind]: list(d.glob("snoop-*.json"))  # noqa: E731
            wait_for(found, 120, f"the {kind} snoop")
            live.http.post(f"/experiments/{snoops[kind]}/stop")
            live.wait_status(snoops[kind], {"stopped", "failed", "succeeded"}, 120)
        assert live.experiment(victim)["status"] == "running"
    finally:
        for exp_id in (victim, *snoops.values()):
            live.http.post(f"/experiments/{exp_id}/stop")
        for exp_id in (victim, *snoops.values()):
            live.wait_status(exp_id, {"stopped", "failed", "succeeded"}, 120)

    for kind, directory in dirs.items():
        (record_file,) = directory.glob("snoop-*.json")
        seen = {int(pid): entry for pid, entry in json.loads(record_file.read_text()).items()}
        assert driver in seen, f"the {kind} snoop did not find the victim's driver"
        assert any(victim_python[pid].startswith(b"ray::") for pid in seen if pid in victim_python)
        for pid in victim_python.keys() & seen.keys():
            entry = seen[pid]
            assert entry == {"environ": "denied", "mem": "denied", "bearer": False}, (
                kind,
                pid,
                victim_python[pid],
                pid == driver,
            )
        assert not any(entry["bearer"] for entry in seen.values())  # nor in any other job


def test_an_unknown_jobs_user_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no OS user 'no-such-user-here'"):
        Settings(jobs_user="no-such-user-here")


TRESPASS = """
import json, os, sys
from pathlib import Path
data, pid = Path(sys.argv[1]), sys.argv[2]
def attempt(action):
    try:
        action()
    except PermissionError:
        return "denied"
    return "done"
print(json.dumps({
    "read database": attempt(lambda: (data / "rollout.db").read_bytes()),
    "write database": attempt(lambda: (data / "rollout.db").open("r+b").close()),
    "list data dir": attempt(lambda: list(data.iterdir())),
    "list checkpoints": attempt(lambda: list((data / "checkpoints").iterdir())),
    "read service environ": attempt(lambda: Path(f"/proc/{pid}/environ").read_bytes()),
    "write own job dir": attempt(lambda: (data / "jobs" / "7").mkdir()),
}))
"""


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess[str]:
    entry = pwd.getpwnam("nobody")
    return subprocess.run(
        argv,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another OS user needs root")
@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system python3")
def test_with_a_jobs_user_the_data_dir_holds_nothing_for_it_but_its_job_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the service prepares for ROLLOUT_JOBS_USER, tried by that user's process (the
    system python: a job's code has the same rights): the database, the data dir's listing,
    the checkpoints and the service's environment are closed to it, its jobs/ dir is open."""
    monkeypatch.setenv("ROLLOUT_API_TOKEN", API_TOKEN)
    data_dir = Path(tempfile.mkdtemp(prefix="rollout-jobs-user-", dir="/tmp"))
    try:
        settings = Settings(
            data_dir=data_dir, jobs_user="nobody", frontend_dir=tmp_path, jobs_enabled=False
        )
        settings.prepare_data_dir()
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o711
        done = _as_nobody(["/usr/bin/python3", "-c", TRESPASS, str(data_dir), str(os.getpid())])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "read database": "denied",
            "write database": "denied",
            "list data dir": "denied",
            "list checkpoints": "denied",
            "read service environ": "denied",
            "write own job dir": "done",
        }
        # Without a jobs user the data dir stays the service's alone.
        Settings(data_dir=data_dir, frontend_dir=tmp_path, jobs_enabled=False).prepare_data_dir()
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def jobs_user_and_python() -> Iterator[tuple[str, str]]:
    """A fresh jobs user and an interpreter it may run (tests/other_users.py)."""
    why_not = why_not_other_users()
    if why_not is not None:
        pytest.skip(why_not)
    with fresh_users(1) as (user,), other_users.shared_python(user) as python:
        if python is None:
            pytest.skip("the jobs user cannot import the project")
        yield user, python


def test_jobs_run_as_the_jobs_user_and_cannot_reach_the_data_or_the_service(
    jobs_user_and_python: tuple[str, str],
) -> None:
    """ROLLOUT_JOBS_USER: `rollout serve` as root, its local head (and so every job) as the
    jobs user; a hostile env module in the driver and in an EnvRunner can neither read nor
    write the database, list the data dir or the checkpoints, nor read the service's
    environment, while its run trains, reports and is salvageable as usual."""
    user, python = jobs_user_and_python
    # Below /tmp (traversable), not pytest's 0700 tmp dir: the jobs user reaches its job dirs.
    data_dir = Path(tempfile.mkdtemp(prefix="rollout-jobs-user-", dir="/tmp"))
    env = {
        "ROLLOUT_JOBS_USER": user,
        "ROLLOUT_JOBS_USERS": None,
        "ROLLOUT_API_TOKEN": API_TOKEN,  # in the service's environment: no job may read it
        "ROLLOUT_DATABASE_URL": None,
        "ROLLOUT_RAY_WARMUP": "false",
        "ROLLOUT_RAY_ADDRESS": None,
        "RAY_ADDRESS": None,
    }
    try:
        with rollout_serve(data_dir, env=env, python=python) as served:
            api = ServedApi(served.url, API_TOKEN)
            ids: list[int] = []
            for runners in (0, 1):  # the env is built in the driver, then in an EnvRunner
                config = {
                    **spy_config(data_dir / f"unused-{runners}", runners),
                    "env_id": f"tests.service.job_trespass:{job_trespass.ENV_ID}",
                    "env_config": {"data_dir": str(data_dir), "service_pid": served.proc.pid},
                    "stop": {"env_steps": 2048},
                }
                ids.append(api.submit(config, name=f"trespass {runners}"))
            finished = [api.wait(i, {"succeeded", "failed", "stopped"}, 240) for i in ids]
        uid = pwd.getpwnam(user).pw_uid
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o711
        for exp, exp_id in zip(finished, ids, strict=True):
            assert exp["status"] == "succeeded", (exp["events"][-1], exp["error"])
            job_dir = experiment_job_dir(data_dir, exp_id)
            assert job_dir.stat().st_uid == uid  # the job wrote its own dir
            records = list(job_dir.glob("trespass-*.json"))  # each process that built it
            assert records, f"experiment {exp_id} never built its env"
            for record in records:
                outcome = json.loads(record.read_text())
                assert outcome == {
                    "uid": uid,
                    "read database": "denied",
                    "write database": "denied",
                    "list data dir": "denied",
                    "list checkpoints": "denied",
                    "read service environ": "denied",
                }
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_sqlite_database_given_by_url_is_kept_private_too(tmp_path: Path) -> None:
    """ROLLOUT_DATABASE_URL naming a SQLite file gets 0600 like the default one (it was left
    as SQLite made it, 0644: readable by a jobs user)."""
    database = tmp_path / "elsewhere" / "custom.db"
    database.parent.mkdir()
    database.write_bytes(b"")
    database.chmod(0o644)
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{database}",
        frontend_dir=tmp_path,
        jobs_enabled=False,
    )
    assert settings.sqlite_file == database
    settings.prepare_data_dir()
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert Settings(database_url="sqlite:///:memory:").sqlite_file is None
    assert Settings(database_url="postgresql+psycopg://u@h/d").sqlite_file is None
